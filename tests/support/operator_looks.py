"""Proof that the operator has looked, for tests that assert that nothing happened.

A sleep before "nothing happened" passes by luck when the operator is slow that once.
These wait instead for what the operator serves on /metrics: a pass over the job begun
after a moment (mgj_job_last_reconcile_timestamp_seconds), or no work left at all."""

from __future__ import annotations

import time

from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.jobs import JobEnv
from support.operator_process import OperatorProcess
from support.waiting import wait_for

POKE = "test.multigpu.dev/looked-after"


def samples(operator: OperatorProcess) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(operator.metrics())
        for sample in family.samples
    ]


def last_pass(operator: OperatorProcess, namespace: str, name: str) -> float | None:
    """When the operator's last finished pass over the job began (Unix time)."""
    labels = {"namespace": namespace, "job": name}
    return next(
        (
            value
            for metric, have, value in samples(operator)
            if metric == "mgj_job_last_reconcile_timestamp_seconds" and have == labels
        ),
        None,
    )


def looked_at(
    operator: OperatorProcess, jobs: JobEnv, name: str, after: float | None = None
) -> None:
    """Return once the operator has finished a pass over job `name` begun after now, or
    after the time `after` (a deadline the test waits out: the pass is what proves it
    passed for the operator too). An annotation on the job, nothing the operator reads,
    makes that pass come when nothing else would wake one."""
    since = max(time.time(), after or 0)
    time.sleep(max(0.0, since - time.time()))
    poke = {"metadata": {"annotations": {POKE: f"{since:.3f}"}}}
    client.CustomObjectsApi(jobs.api).patch_namespaced_custom_object(
        GROUP, VERSION, jobs.namespace, PLURAL, name, poke
    )
    wait_for(
        lambda: (last_pass(operator, jobs.namespace, name) or 0) >= since,
        f"a pass over {name} begun after the test looked",
    )


def idle(operator: OperatorProcess, namespace: str) -> bool:
    """Nothing queued, no worker busy, and no job or pod of `namespace` in the caches."""
    state = samples(operator)
    gauges = {metric: value for metric, labels, value in state if not labels}
    cached = any(
        metric in ("mgj_job_info", "mgj_job_pod_info") and labels.get("namespace") == namespace
        for metric, labels, _ in state
    )
    return (
        gauges.get("mgj_workqueue_depth") == 0
        and gauges.get("mgj_active_workers") == 0
        and not cached
    )


def api_requests(metrics: str) -> set[tuple[str, str]]:
    """(verb, resource) pairs the operator sent, from mgj_api_requests_total."""
    return {
        (sample.labels["verb"], sample.labels["resource"])
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "mgj_api_requests_total" and sample.value > 0
    }

"""Every metric the dashboard and the alerts use is really exported: scraped from a real
operator process that took jobs through success, a restart and failure, and from the
trainer package's own metrics server. Names outside mgj_* must be documented (DCGM, up)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable
from functools import partial
from typing import Any

from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from cluster.localcluster import LocalCluster
from multigpu_operator.local.host import free_port
from multigpu_train import metrics as trainer_metrics
from support.chart import only, render
from support.jobs import SIM, apply, job_manifest, job_phase
from support.operator_process import OperatorProcess
from support.promql import (
    DASHBOARD,
    dashboard_expressions,
    documented_metrics,
    load_dashboard,
    metric_names,
    rule_expressions,
)
from support.waiting import wait_for

Samples = dict[str, list[dict[str, str]]]


def samples(exposition: str) -> Samples:
    """Sample name -> the label sets it has."""
    found: Samples = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(dict(sample.labels))
    return found


def used_metrics(cluster: LocalCluster) -> set[str]:
    rule = only(render(cluster.tools, "--set", "prometheusRule.enabled=true"), "PrometheusRule")
    expressions: Iterable[str] = [
        *dashboard_expressions(load_dashboard(DASHBOARD)).values(),
        *rule_expressions(rule["spec"]["groups"]).values(),
    ]
    return set().union(*map(metric_names, expressions))


def has_phase(api: client.ApiClient, namespace: str, name: str, phase: str) -> bool:
    return job_phase(api, namespace, name) == phase


def operator_after_a_jobs_life(
    operator: OperatorProcess, cluster: LocalCluster, api: client.ApiClient, namespace: str
) -> Samples:
    """Succeeded, Failed after one restart, and one still Running: every series exists."""
    # CPU-only, so no job waits for GPUs that other jobs on the shared test cluster hold.
    done = job_manifest("done", replicas=1, gpus=0, annotations={f"{SIM}/succeed-after": "1s"})
    flaky = job_manifest(
        "flaky",
        replicas=1,
        gpus=0,
        annotations={f"{SIM}/fail-after": "1s"},
        runPolicy={"backoffLimit": 1},
    )
    runs = job_manifest("runs", replicas=2, gpus=0)
    jobs = {"done": (done, "Succeeded"), "flaky": (flaky, "Failed"), "runs": (runs, "Running")}
    for manifest, _ in jobs.values():
        apply(cluster, namespace, manifest)
    for name, (_, phase) in jobs.items():
        wait_for(partial(has_phase, api, namespace, name, phase), f"{name} {phase}")
    return samples(operator.metrics())


def trainer_exposition() -> Samples:
    """The trainer's metrics server (MGJ_TRAINER_METRICS_PORT), after one training step."""
    port = free_port()
    served = trainer_metrics.start(port, 0, job="ddp", rank=0, world_size=4, restarts=0)
    served.observe_step(samples=32, data_seconds=0.01, step_seconds=0.05, loss=2.3)
    served.checkpointed()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return samples(response.read().decode())


def test_every_metric_in_dashboard_and_alerts_is_exported(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    exported = {
        **operator_after_a_jobs_life(operator, installed_crd, api_client, namespace),
        **trainer_exposition(),
    }
    used = used_metrics(installed_crd)
    ours = {name for name in used if name.startswith("mgj_")}
    assert ours - set(exported) == set()
    assert used - ours <= documented_metrics()
    assert any(name.startswith("DCGM_FI_") for name in used)

    # The labels the dashboard joins and groups on.
    pod_info: list[dict[str, Any]] = exported["mgj_job_pod_info"]
    assert {"namespace", "pod", "job", "replica"} <= set(pod_info[0])
    assert {(s["job"], s["pod"]) for s in pod_info} >= {("runs", "runs-0"), ("runs", "runs-1")}
    for name in ("mgj_trainer_samples_total", "mgj_trainer_step_seconds_sum", "mgj_trainer_loss"):
        assert exported[name] == [{"job": "ddp", "rank": "0"}]
    world = {s["job"]: s for s in exported["mgj_job_world_size"]}
    assert world["runs"]["namespace"] == namespace

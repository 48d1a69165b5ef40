"""Restart policies, whole-attempt and single-pod replacement, on the real control plane.

Failures are injected with the kwok stages: pods annotated sim.multigpu.dev/fail-after
fail with the annotated exit code; annotating a running pod fails it mid-run.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from cluster.localcluster import LocalCluster
from support.events import list_events
from support.jobs import (
    SIM,
    annotate_pod,
    apply,
    condition,
    job_manifest,
    job_status,
    live_pods,
)
from support.operator_process import OperatorProcess
from support.waiting import wait_for

RUN_LONG = {f"{SIM}/succeed-after": "600s"}


def fail_with(code: int) -> dict[str, str]:
    return {f"{SIM}/fail-after": "1s", f"{SIM}/exit-code": str(code)}


@pytest.mark.parametrize(
    ("run_policy", "exit_code", "attempts", "reason"),
    [
        pytest.param({"restartPolicy": "ExitCode"}, 1, 1, "NonRetryableExitCode", id="exitcode-1"),
        pytest.param(
            {"restartPolicy": "ExitCode", "backoffLimit": 1},
            137,
            2,
            "BackoffLimitExceeded",
            id="exitcode-137-retried",
        ),
        pytest.param(
            {"restartPolicy": "OnFailure", "backoffLimit": 2},
            1,
            3,
            "BackoffLimitExceeded",
            id="onfailure-backoff-2",
        ),
        pytest.param({"restartPolicy": "Never"}, 137, 1, "PodFailed", id="never"),
    ],
)
def test_restart_policy_makes_exactly_the_promised_attempts(
    run_policy: dict[str, Any],
    exit_code: int,
    attempts: int,
    reason: str,
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    manifest = job_manifest("retry", annotations=fail_with(exit_code), runPolicy=run_policy)
    apply(installed_crd, namespace, manifest)

    def failed() -> dict[str, Any] | None:
        status = job_status(api_client, namespace, "retry")
        return status if status.get("phase") == "Failed" else None

    status = wait_for(failed, "job Failed", timeout=90)
    assert status["attempt"] == attempts
    assert status["restarts"] == attempts - 1
    failed_condition = condition(status, "Failed")
    assert failed_condition["reason"] == reason
    assert f"exit code {exit_code}" in failed_condition["message"]
    assert status["lastFailure"]["exitCode"] == exit_code
    # The last attempt's failed pods stay (cleanPodPolicy Running), labelled with it.
    pods = live_pods(core, namespace, "retry")
    assert {p.metadata.labels["multigpu.dev/attempt"] for p in pods} == {str(attempts)}
    # One Warning event per restart and one for the failure (posted in the background).
    wait_for(
        lambda: len(warnings(api_client, namespace, "retry")) >= attempts,
        f"{attempts} warning events",
    )
    assert len(warnings(api_client, namespace, "retry")) == attempts


def warnings(api_client: client.ApiClient, namespace: str, job: str) -> list[dict[str, Any]]:
    return [
        e
        for e in list_events(api_client, namespace)
        if e["regarding"]["name"] == job and e["type"] == "Warning"
    ]


def running_pods(core: client.CoreV1Api, namespace: str, name: str, n: int) -> list[Any]:
    pods = live_pods(core, namespace, name)
    ok = len(pods) == n and all(p.status.phase == "Running" for p in pods)
    return pods if ok else []


def test_a_failed_ddp_rank_replaces_every_pod(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    apply(installed_crd, namespace, job_manifest("ddp", replicas=3, annotations=RUN_LONG))
    first = wait_for(lambda: running_pods(core, namespace, "ddp", 3), "3 pods Running")
    before = {p.metadata.name: p.metadata.uid for p in first}

    annotate_pod(core, namespace, "ddp-1", {**fail_with(137), f"{SIM}/fail-after": "0s"})

    def second_attempt_running() -> list[Any]:
        pods = running_pods(core, namespace, "ddp", 3)
        return [p for p in pods if p.metadata.labels["multigpu.dev/attempt"] == "2"]

    after = wait_for(lambda: len(second_attempt_running()) == 3, "attempt 2 running", timeout=60)
    assert after
    now = {p.metadata.name: p.metadata.uid for p in live_pods(core, namespace, "ddp")}
    assert set(now) == set(before)
    assert all(now[name] != before[name] for name in before)  # every rank replaced
    status = wait_for(
        lambda: (s := job_status(api_client, namespace, "ddp")).get("phase") == "Running" and s,
        "job Running again",
    )
    assert (status["attempt"], status["restarts"]) == (2, 1)
    assert status["lastFailure"]["pod"] == "ddp-1"
    assert condition(status, "Restarting")["status"] == "False"


def test_a_failed_elastic_pod_is_replaced_alone(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    manifest = job_manifest(
        "el",
        mode="Elastic",
        replicas=3,
        annotations=RUN_LONG,
        elastic={"minReplicas": 1, "maxReplicas": 4},
    )
    apply(installed_crd, namespace, manifest)
    first = wait_for(lambda: running_pods(core, namespace, "el", 3), "3 pods Running")
    before = {p.metadata.name: p.metadata.uid for p in first}

    annotate_pod(core, namespace, "el-1", {**fail_with(137), f"{SIM}/fail-after": "0s"})

    def replaced() -> dict[str, str] | None:
        pods = running_pods(core, namespace, "el", 3)
        uids = {p.metadata.name: p.metadata.uid for p in pods}
        return uids if pods and uids["el-1"] != before["el-1"] else None

    after = wait_for(replaced, "el-1 replaced and running", timeout=60)
    assert after["el-0"] == before["el-0"]
    assert after["el-2"] == before["el-2"]
    status = job_status(api_client, namespace, "el")
    assert status["restarts"] == 1
    assert status["phase"] == "Running"
    assert status["attempt"] == 1  # the group was not restarted

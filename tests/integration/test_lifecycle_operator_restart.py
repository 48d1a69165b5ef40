"""The operator is down while something happens to a job; restarted, it reaches the same
end state as if it had watched all along (and counts nothing twice)."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from cluster.localcluster import LocalCluster
from support.jobs import (
    SIM,
    annotate_pod,
    apply,
    condition,
    job_manifest,
    job_status,
    live_pods,
    patch_spec,
)
from support.operator_process import OperatorProcess
from support.waiting import wait_for

RUN_LONG = {f"{SIM}/succeed-after": "600s"}


def phase_is(api_client: client.ApiClient, namespace: str, name: str, phase: str) -> Any:
    def probe() -> dict[str, Any] | None:
        status = job_status(api_client, namespace, name)
        return status if status.get("phase") == phase else None

    return wait_for(probe, f"{name} {phase}", timeout=60)


def running(core: client.CoreV1Api, namespace: str, name: str, n: int) -> list[Any]:
    pods = [p for p in live_pods(core, namespace, name) if p.status.phase == "Running"]
    return pods if len(pods) == n else []


def test_a_rank_fails_while_the_operator_is_down(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    apply(installed_crd, namespace, job_manifest("j", replicas=2, annotations=RUN_LONG))
    phase_is(api_client, namespace, "j", "Running")
    operator.kill()
    annotate_pod(core, namespace, "j-1", {f"{SIM}/fail-after": "0s", f"{SIM}/exit-code": "137"})
    wait_for(lambda: core.read_namespaced_pod("j-1", namespace).status.phase == "Failed", "fail")
    operator.start()

    def second_attempt() -> list[Any]:
        pods = running(core, namespace, "j", 2)
        return [p for p in pods if p.metadata.labels["multigpu.dev/attempt"] == "2"]

    wait_for(lambda: len(second_attempt()) == 2, "attempt 2 running", timeout=60)
    status = phase_is(api_client, namespace, "j", "Running")
    assert (status["attempt"], status["restarts"]) == (2, 1)


def test_suspend_and_resume_while_the_operator_is_down(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    apply(installed_crd, namespace, job_manifest("j", annotations=RUN_LONG))
    phase_is(api_client, namespace, "j", "Running")
    operator.kill()
    patch_spec(api_client, namespace, "j", {"suspend": True})
    operator.start()
    phase_is(api_client, namespace, "j", "Suspended")
    wait_for(lambda: not live_pods(core, namespace, "j"), "pods deleted")
    operator.kill()
    patch_spec(api_client, namespace, "j", {"suspend": False})
    operator.start()
    status = phase_is(api_client, namespace, "j", "Running")
    assert (status["attempt"], status["restarts"]) == (2, 0)


def test_the_deadline_passes_while_the_operator_is_down(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    manifest = job_manifest("j", annotations=RUN_LONG, runPolicy={"activeDeadlineSeconds": 5})
    apply(installed_crd, namespace, manifest)
    phase_is(api_client, namespace, "j", "Running")
    operator.kill()
    time.sleep(6)
    operator.start()
    status = phase_is(api_client, namespace, "j", "Failed")
    assert condition(status, "Failed")["reason"] == "DeadlineExceeded"
    wait_for(lambda: not live_pods(core, namespace, "j"), "pods deleted")


def test_an_elastic_job_is_scaled_while_the_operator_is_down(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    limits = {"minReplicas": 1, "maxReplicas": 4}
    apply(installed_crd, namespace, job_manifest("j", "Elastic", 2, 1, RUN_LONG, elastic=limits))
    wait_for(lambda: running(core, namespace, "j", 2), "2 pods running")
    operator.kill()
    installed_crd.kubectl("scale", "-n", namespace, "mgj/j", "--replicas=3")
    operator.start()
    wait_for(lambda: running(core, namespace, "j", 3), "3 pods running")
    wait_for(lambda: job_status(api_client, namespace, "j").get("worldSize") == 3, "world size 3")

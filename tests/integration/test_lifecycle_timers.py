"""Deadlines, TTL, clean-pod policies, suspend and gang start on the real control plane."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

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
    read_job,
)
from support.operator_process import OperatorProcess
from support.waiting import wait_for

RUN_LONG = {f"{SIM}/succeed-after": "600s"}


def status_when(
    api_client: client.ApiClient, namespace: str, name: str, phase: str, timeout: float = 60
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        status = job_status(api_client, namespace, name)
        return status if status.get("phase") == phase else None

    return wait_for(probe, f"{name} {phase}", timeout=timeout)


def all_running(core: client.CoreV1Api, namespace: str, name: str, n: int) -> bool:
    pods = live_pods(core, namespace, name)
    return len(pods) == n and all(p.status.phase == "Running" for p in pods)


def test_active_deadline_fails_a_running_job_and_its_pods_are_gone(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    manifest = job_manifest("late", annotations=RUN_LONG, runPolicy={"activeDeadlineSeconds": 4})
    apply(installed_crd, namespace, manifest)
    status_when(api_client, namespace, "late", "Running")
    status = status_when(api_client, namespace, "late", "Failed", timeout=30)
    assert condition(status, "Failed")["reason"] == "DeadlineExceeded"
    wait_for(lambda: not live_pods(core, namespace, "late"), "pods deleted")


def test_ttl_deletes_a_finished_job_and_its_children(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    manifest = job_manifest(
        "brief",
        annotations={f"{SIM}/succeed-after": "1s"},
        runPolicy={"ttlSecondsAfterFinished": 2},
    )
    apply(installed_crd, namespace, manifest)
    status_when(api_client, namespace, "brief", "Succeeded")

    def gone() -> bool:
        try:
            read_job(api_client, namespace, "brief")
        except ApiException as err:
            return bool(err.status == 404)
        return False

    wait_for(gone, "job deleted after its TTL", timeout=30)
    wait_for(lambda: not live_pods(core, namespace, "brief"), "pods garbage-collected")


@pytest.mark.parametrize(
    ("policy", "left"),
    [
        pytest.param("All", set(), id="all"),
        pytest.param("Running", {"clean-0", "clean-1"}, id="running"),
        pytest.param("None", {"clean-0", "clean-1", "clean-2"}, id="none"),
    ],
)
def test_clean_pod_policy_leaves_exactly_the_promised_pods(
    policy: str,
    left: set[str],
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    run_policy = {"cleanPodPolicy": policy, "restartPolicy": "Never"}
    apply(installed_crd, namespace, job_manifest("clean", replicas=3, runPolicy=run_policy))
    wait_for(lambda: all_running(core, namespace, "clean", 3), "3 pods Running")
    annotate_pod(core, namespace, "clean-0", {f"{SIM}/succeed-after": "0s"})
    wait_for(
        lambda: core.read_namespaced_pod("clean-0", namespace).status.phase == "Succeeded",
        "clean-0 Succeeded",
    )
    annotate_pod(core, namespace, "clean-1", {f"{SIM}/fail-after": "0s"})
    status_when(api_client, namespace, "clean", "Failed")

    def settled() -> bool:
        return {p.metadata.name for p in live_pods(core, namespace, "clean")} == left

    wait_for(settled, f"pods left by {policy}")
    time.sleep(2)  # and nothing more goes afterwards
    assert {p.metadata.name for p in live_pods(core, namespace, "clean")} == left


def test_suspend_deletes_the_pods_and_resume_starts_a_new_attempt(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    apply(installed_crd, namespace, job_manifest("pause", annotations=RUN_LONG))
    status_when(api_client, namespace, "pause", "Running")

    patch_spec(api_client, namespace, "pause", {"suspend": True})
    suspended = status_when(api_client, namespace, "pause", "Suspended")
    assert condition(suspended, "Suspended")["status"] == "True"
    assert condition(suspended, "Running")["status"] == "False"
    wait_for(lambda: not live_pods(core, namespace, "pause"), "pods deleted")

    patch_spec(api_client, namespace, "pause", {"suspend": False})
    resumed = status_when(api_client, namespace, "pause", "Running")
    assert (resumed["attempt"], resumed["restarts"]) == (2, 0)
    assert condition(resumed, "Suspended")["reason"] == "Resumed"
    labels = {
        p.metadata.labels["multigpu.dev/attempt"] for p in live_pods(core, namespace, "pause")
    }
    assert labels == {"2"}


def test_a_job_larger_than_the_cluster_times_out_and_releases_its_pods(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    # 5 pods x 8 GPUs; the cluster has 4 nodes of 8.
    gang = {"timeoutSeconds": 3, "onTimeout": "Requeue", "requeueAfterSeconds": 600}
    apply(installed_crd, namespace, job_manifest("huge", replicas=5, gpus=8, gang=gang))

    def released() -> dict[str, Any] | None:
        status = job_status(api_client, namespace, "huge")
        return status if condition(status, "Scheduled").get("reason") == "GangTimeout" else None

    status = wait_for(released, "gang timeout", timeout=60)
    message = condition(status, "Scheduled")["message"]
    assert "of 5 pods unscheduled" in message
    assert "Insufficient nvidia.com/gpu" in message
    assert "released its pods" in message
    assert status["phase"] == "Pending"
    wait_for(lambda: not live_pods(core, namespace, "huge"), "no pods held")
    time.sleep(3)
    assert not live_pods(core, namespace, "huge")


def test_pods_held_by_a_kueue_admission_gate_wait_without_timing_out(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    manifest = job_manifest(
        "queued",
        labels={"kueue.x-k8s.io/queue-name": "team-a"},
        annotations=RUN_LONG,
        gang={"timeoutSeconds": 2, "onTimeout": "Fail"},
    )
    # What Kueue's webhook adds to the pods of a queued pod group.
    manifest["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    apply(installed_crd, namespace, manifest)
    wait_for(lambda: len(live_pods(core, namespace, "queued")) == 2, "pods created")
    time.sleep(4)
    status = job_status(api_client, namespace, "queued")
    assert status["phase"] == "Pending"
    assert condition(status, "Scheduled")["reason"] == "SchedulingGated"
    for pod in live_pods(core, namespace, "queued"):
        assert pod.metadata.labels["kueue.x-k8s.io/queue-name"] == "team-a"
        assert pod.metadata.labels["kueue.x-k8s.io/pod-group-name"] == "queued"
        assert pod.metadata.annotations["kueue.x-k8s.io/pod-group-total-count"] == "2"
        # Admission: Kueue removes the gate.
        remove = [{"op": "remove", "path": "/spec/schedulingGates"}]
        core.patch_namespaced_pod(pod.metadata.name, namespace, remove)
    admitted = status_when(api_client, namespace, "queued", "Running")
    assert condition(admitted, "Scheduled")["status"] == "True"

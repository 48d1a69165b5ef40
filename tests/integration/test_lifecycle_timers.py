"""Deadlines, TTL, clean-pod policies, suspend and gang start on the real control plane."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from support.jobs import RUN_LONG, SIM, JobEnv, condition, job_manifest, read_job
from support.operator_looks import looked_at
from support.operator_process import OperatorProcess
from support.waiting import wait_for


def test_active_deadline_fails_a_running_job_and_its_pods_are_gone(
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    manifest = job_manifest("late", annotations=RUN_LONG, runPolicy={"activeDeadlineSeconds": 4})
    jobs.apply(manifest)
    jobs.wait_phase("late", "Running")
    status = jobs.wait_phase("late", "Failed", timeout=30)
    assert condition(status, "Failed")["reason"] == "DeadlineExceeded"
    wait_for(lambda: not jobs.pods("late"), "pods deleted")


def test_ttl_deletes_a_finished_job_and_its_children(
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    manifest = job_manifest(
        "brief",
        annotations={f"{SIM}/succeed-after": "1s"},
        runPolicy={"ttlSecondsAfterFinished": 2},
    )
    jobs.apply(manifest)
    # The Service is created before the pods and deleted by nothing but garbage collection.
    wait_for(lambda: services(jobs), "the job's Service")
    jobs.wait_phase("brief", "Succeeded")

    def gone() -> bool:
        try:
            read_job(jobs.api, jobs.namespace, "brief")
        except ApiException as err:
            return bool(err.status == 404)
        return False

    wait_for(gone, "job deleted after its TTL", timeout=30)
    wait_for(lambda: not jobs.pods("brief"), "pods garbage-collected")
    wait_for(lambda: not services(jobs), "Service garbage-collected")


def services(jobs: JobEnv) -> list[str]:
    """The names of the Services in the test's namespace."""
    return [s.metadata.name for s in jobs.core.list_namespaced_service(jobs.namespace).items]


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
    jobs: JobEnv,
) -> None:
    run_policy = {"cleanPodPolicy": policy, "restartPolicy": "Never"}
    jobs.apply(job_manifest("clean", replicas=3, runPolicy=run_policy))
    wait_for(lambda: jobs.running("clean", 3), "3 pods Running")
    jobs.annotate("clean-0", {f"{SIM}/succeed-after": "0s"})
    wait_for(
        lambda: (
            {p.metadata.name: p.status.phase for p in jobs.pods("clean")}["clean-0"] == "Succeeded"
        ),
        "clean-0 Succeeded",
    )
    jobs.annotate("clean-1", {f"{SIM}/fail-after": "0s"})
    jobs.wait_phase("clean", "Failed")

    def settled() -> bool:
        return {p.metadata.name for p in jobs.pods("clean")} == left

    wait_for(settled, f"pods left by {policy}")
    looked_at(operator, jobs, "clean")  # and nothing more goes afterwards
    assert {p.metadata.name for p in jobs.pods("clean")} == left


def test_suspend_deletes_the_pods_and_resume_starts_a_new_attempt(
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    jobs.apply(job_manifest("pause", annotations=RUN_LONG))
    jobs.wait_phase("pause", "Running")

    jobs.patch_spec("pause", {"suspend": True})
    suspended = jobs.wait_phase("pause", "Suspended")
    assert condition(suspended, "Suspended")["status"] == "True"
    assert condition(suspended, "Running")["status"] == "False"
    wait_for(lambda: not jobs.pods("pause"), "pods deleted")

    jobs.patch_spec("pause", {"suspend": False})
    resumed = jobs.wait_phase("pause", "Running")
    assert (resumed["attempt"], resumed["restarts"]) == (2, 0)
    assert condition(resumed, "Suspended")["reason"] == "Resumed"
    labels = {p.metadata.labels["multigpu.dev/attempt"] for p in jobs.pods("pause")}
    assert labels == {"2"}


def test_a_job_larger_than_the_cluster_times_out_and_releases_its_pods(
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    # 5 pods x 8 GPUs; the cluster has 4 nodes of 8.
    gang = {"timeoutSeconds": 3, "onTimeout": "Requeue", "requeueAfterSeconds": 600}
    jobs.apply(job_manifest("huge", replicas=5, gpus=8, gang=gang))

    def released() -> dict[str, Any] | None:
        status = jobs.status("huge")
        return status if condition(status, "Scheduled").get("reason") == "GangTimeout" else None

    status = wait_for(released, "gang timeout", timeout=60)
    message = condition(status, "Scheduled")["message"]
    assert "of 5 pods unscheduled" in message
    assert "Insufficient nvidia.com/gpu" in message
    assert "released its pods" in message
    assert status["phase"] == "Pending"
    wait_for(lambda: not jobs.pods("huge"), "no pods held")
    looked_at(operator, jobs, "huge")  # and none created again before requeueAfterSeconds
    assert not jobs.pods("huge")


def test_pods_held_by_a_scheduling_gate_wait_without_timing_out(
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    manifest = job_manifest(
        "queued",
        annotations=RUN_LONG,
        gang={"timeoutSeconds": 2, "onTimeout": "Fail"},
    )
    # What an admission webhook adds to pods it holds (Kueue's, for its pod groups).
    manifest["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    jobs.apply(manifest)
    wait_for(lambda: len(jobs.pods("queued")) == 2, "pods created")
    # A pass past the gang timeout (the pods were created before now; the status's
    # timestamps have whole seconds) finds the gated pods still waiting.
    looked_at(operator, jobs, "queued", after=time.time() + 2 + 1)
    status = jobs.status("queued")
    assert status["phase"] == "Pending"
    assert condition(status, "Scheduled")["reason"] == "SchedulingGated"
    # Once admitted, the pods get the usual time to be scheduled.
    jobs.patch_spec("queued", {"gang": {"timeoutSeconds": 300}})
    for pod in jobs.pods("queued"):
        # Admission: the webhook's controller removes the gate.
        remove = [{"op": "remove", "path": "/spec/schedulingGates"}]
        jobs.core.patch_namespaced_pod(pod.metadata.name, jobs.namespace, remove)
    admitted = jobs.wait_phase("queued", "Running")
    assert condition(admitted, "Scheduled")["status"] == "True"

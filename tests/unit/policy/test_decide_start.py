"""Jobs that cannot start, through the pure reconcile pass (no cluster): containers the
kubelet cannot start under spec.startPolicy, pods no node can ever fit, an OOM-killed
rank, and a job that never says its pods run while one does not."""

from __future__ import annotations

from typing import Any

import pytest

from support.lifecycle import JobRun, job_object
from support.policy import gpu_node

PULL = 'Back-off pulling image "train:1"'
CLUSTER = [gpu_node(f"gpu-node-{i}") for i in range(4)]


def ddp(replicas: int = 2, **spec: Any) -> JobRun:
    return JobRun(job_object(replicas=replicas, **{"gpusPerReplica": 2, **spec}))


def created(run: JobRun) -> JobRun:
    run.step()
    run.step()
    return run


def test_an_image_that_never_pulls_fails_the_job_after_the_timeout_and_frees_its_pods() -> None:
    run = created(ddp(startPolicy={"timeoutSeconds": 120}))
    run.set_phase("job-0", "Running")
    run.waiting("job-1", "ImagePullBackOff", PULL)
    first = run.step()
    assert run.status["phase"] == "Pending"
    assert run.status["reason"] == "ImagePullBackOff"
    assert run.condition("Running")["status"] == "False"
    assert 'image "train:1"' in run.condition("Running")["message"]
    assert first.requeue_after == pytest.approx(120)
    assert run.events()[-1] == ("Warning", "ImagePullBackOff")

    assert run.step(60).events == ()  # the same problem is posted once
    end = run.step(60)
    assert run.status["phase"] == "Failed"
    assert run.status["reason"] == "ImagePullBackOff"
    failed = run.condition("Failed")
    assert failed["reason"] == "ImagePullBackOff"
    assert "pod job-1 (replica 1) container trainer" in failed["message"]
    assert PULL in failed["message"]
    assert "startPolicy.timeoutSeconds (120s)" in failed["message"]
    assert [(e.type, e.reason) for e in end.events] == [("Warning", "ImagePullBackOff")]
    assert set(end.delete_pods) == {"job-0", "job-1"}  # cleanPodPolicy Running
    assert "cannotStartSince" not in run.status


def test_an_invalid_image_name_fails_at_once() -> None:
    run = created(ddp())
    run.waiting("job-0", "InvalidImageName", "couldn't parse image name")
    run.step()
    assert (run.status["phase"], run.status["reason"]) == (
        "Failed",
        "InvalidImageName",
    )
    assert "no retry can fix this" in run.condition("Failed")["message"]
    assert run.pods == {}


def test_a_healed_problem_stops_the_timer() -> None:
    run = created(ddp(startPolicy={"timeoutSeconds": 120}))
    run.waiting("job-0", "CreateContainerConfigError", 'configmap "cfg" not found')
    run.step()
    assert run.status["cannotStartSince"]
    run.run_all()  # the ConfigMap was created
    run.step(100)
    assert run.status["phase"] == "Running"
    assert "cannotStartSince" not in run.status
    assert run.status["reason"] == "PodsRunning"
    # The same problem later starts a fresh timer.
    run.waiting("job-0", "CreateContainerConfigError", 'configmap "cfg" not found')
    again = run.step(100)
    assert run.status["phase"] == "Pending"
    assert run.status["cannotStartSince"] == run.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert again.requeue_after == pytest.approx(120)


def test_wait_keeps_the_pods_and_says_what_it_waits_for() -> None:
    run = created(ddp(startPolicy={"onTimeout": "Wait", "timeoutSeconds": 10}))
    run.waiting("job-0", "ErrImagePull", "not found")
    run.step()
    run.step(3600)
    assert run.status["phase"] == "Pending"
    assert "startPolicy.onTimeout Wait" in run.condition("Running")["message"]
    assert set(run.pods) == {"job-0", "job-1"}


def test_a_crash_looping_sidecar_takes_a_running_job_out_of_running_and_back() -> None:
    run = created(ddp())
    run.run_all()
    run.step()
    assert run.status["phase"] == "Running"
    run.waiting("job-1", "CrashLoopBackOff", "back-off 20s restarting", sidecar=True)
    run.step()
    assert run.status["phase"] == "Pending"
    assert run.status["reason"] == "CrashLoopBackOff"
    assert run.status["pods"]["running"] == 1
    running = run.condition("Running")
    assert (running["status"], running["reason"]) == ("False", "CrashLoopBackOff")
    assert "init container log" in running["message"]
    run.step(3600)
    assert run.status["phase"] == "Pending"  # waited for: the kubelet restarts it
    run.run_all()
    run.step()
    assert run.status["phase"] == "Running"
    assert run.condition("Running")["reason"] == "PodsRunning"


def unschedulable(run: JobRun, message: str) -> None:
    for name in run.pods:
        run.unschedulable(name, message)


NO_ROOM = "0/5 nodes are available: 4 Insufficient nvidia.com/gpu"


@pytest.mark.parametrize(
    ("on_timeout", "phase", "reason"),
    [
        pytest.param("Requeue", "Failed", "NoNodeFits", id="requeue-fails-instead"),
        pytest.param("Fail", "Failed", "NoNodeFits", id="fail"),
        pytest.param("Wait", "Pending", "NoNodeFits", id="wait"),
    ],
)
def test_a_job_no_node_can_fit_says_so_at_once_and_is_not_requeued(
    on_timeout: str, phase: str, reason: str
) -> None:
    run = ddp(gpusPerReplica=16, gang={"timeoutSeconds": 60, "onTimeout": on_timeout})
    run.nodes = CLUSTER
    created(run)
    unschedulable(run, NO_ROOM)
    run.step()
    assert (run.status["phase"], run.status["reason"]) == (
        "Pending",
        "NoNodeFits",
    )
    scheduled = run.condition("Scheduled")
    assert scheduled["reason"] == "NoNodeFits"
    assert scheduled["message"].startswith(
        "no node can ever fit pod job-0: it asks for 16 nvidia.com/gpu, the largest node has 8"
    )
    assert ("Warning", "NoNodeFits") in run.events()
    run.step(60)
    assert (run.status["phase"], run.status["reason"]) == (phase, reason)
    assert run.status["attempt"] == 1  # never requeued
    if phase == "Failed":
        assert run.pods == {}


def test_a_busy_cluster_is_still_requeued() -> None:
    run = ddp(gpusPerReplica=8, gang={"timeoutSeconds": 60, "requeueAfterSeconds": 30})
    run.nodes = CLUSTER
    created(run)
    unschedulable(run, NO_ROOM)
    run.step()
    assert (run.status["phase"], run.status["reason"]) == (
        "Pending",
        "Unschedulable",
    )
    run.step(60)
    assert run.condition("Scheduled")["reason"] == "GangTimeout"
    assert "requeueAt" in run.status


def test_an_oom_killed_rank_is_retried_and_says_to_raise_the_memory_limit() -> None:
    run = created(ddp(runPolicy={"backoffLimit": 1}))
    run.run_all()
    run.step()
    run.set_phase("job-1", "Failed", 137)
    run.pods["job-1"]["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = (
        "OOMKilled"
    )
    run.step()
    assert run.status["phase"] == "Restarting"
    assert run.status["lastFailure"]["reason"] == "OOMKilled"
    message = run.condition("Restarting")["message"]
    assert "failed with exit code 137: OOMKilled" in message
    assert "raise its resources.limits.memory" in message

"""Deadlines, TTL, cleanup, suspend, gang start and elastic size through the pure
reconcile pass (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from support.lifecycle import JobRun, job_object

GPU_SHORTAGE = (
    "0/5 nodes are available: 4 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint"
)


def ddp(replicas: int = 2, **spec: Any) -> JobRun:
    return JobRun(job_object(replicas=replicas, gpusPerReplica=2, **spec))


def running(run: JobRun) -> JobRun:
    run.step()
    run.run_all()
    run.step()
    return run


def test_active_deadline_fails_a_running_job_and_stops_its_pods() -> None:
    run = running(ddp(runPolicy={"activeDeadlineSeconds": 30}))
    before = run.step(10)
    assert before.requeue_after == pytest.approx(20)
    after = run.step(20)
    assert run.status["phase"] == "Failed"
    assert run.condition("Failed")["reason"] == "DeadlineExceeded"
    assert set(after.delete_pods) == {"job-0", "job-1"}
    assert run.pods == {}


def test_ttl_deletes_a_finished_job_after_its_seconds() -> None:
    run = running(ddp(runPolicy={"ttlSecondsAfterFinished": 60}))
    for name in list(run.pods):
        run.set_phase(name, "Succeeded", 0)
    done = run.step()
    assert run.status["phase"] == "Succeeded"
    assert done.requeue_after == pytest.approx(60)
    assert not done.delete_job
    assert run.step(60).delete_job


@pytest.mark.parametrize(
    ("policy", "left"),
    [
        pytest.param("All", set(), id="all"),
        pytest.param("Running", {"job-0", "job-1"}, id="running"),
        pytest.param("None", {"job-0", "job-1", "job-2"}, id="none"),
    ],
)
def test_clean_pod_policy_leaves_exactly_what_it_promises(policy: str, left: set[str]) -> None:
    run = running(ddp(replicas=3, runPolicy={"cleanPodPolicy": policy, "restartPolicy": "Never"}))
    run.set_phase("job-0", "Succeeded", 0)
    run.set_phase("job-1", "Failed", 1)
    run.step()
    assert run.status["phase"] == "Failed"
    assert set(run.pods) == left


def test_suspend_deletes_the_pods_and_resume_starts_a_fresh_attempt() -> None:
    run = running(ddp(runPolicy={"activeDeadlineSeconds": 100}))
    run.obj["spec"]["suspend"] = True
    run.step(90)
    assert run.status["phase"] == "Suspended"
    assert run.pods == {}
    assert run.condition("Suspended")["status"] == "True"
    assert run.condition("Running")["status"] == "False"
    run.step(300)  # no deadline while suspended
    assert run.status["phase"] == "Suspended"
    run.obj["spec"]["suspend"] = False
    resumed = run.step()
    assert run.status["attempt"] == 2
    assert run.status["restarts"] == 0
    assert run.condition("Suspended")["reason"] == "Resumed"
    assert len(resumed.create_pods) == 2
    assert run.attempts() == {"2"}
    assert resumed.requeue_after == pytest.approx(100)  # the deadline clock restarted
    run.run_all()
    run.step()
    assert run.status["phase"] == "Running"


def test_a_job_created_suspended_starts_at_attempt_one() -> None:
    run = ddp(suspend=True)
    run.step()
    assert run.status["phase"] == "Suspended"
    assert run.pods == {}
    run.obj["spec"]["suspend"] = False
    run.step()
    assert run.attempts() == {"1"}


def unschedulable_job(on_timeout: str) -> JobRun:
    run = ddp(gang={"timeoutSeconds": 60, "onTimeout": on_timeout, "requeueAfterSeconds": 30})
    run.step()
    run.set_phase("job-0", "Running")
    run.unschedulable("job-1", GPU_SHORTAGE)
    waiting = run.step()
    assert waiting.requeue_after == pytest.approx(60)
    scheduled = run.condition("Scheduled")
    assert scheduled["reason"] == "Unschedulable"
    assert scheduled["message"] == f"1 of 2 pods unscheduled: {GPU_SHORTAGE}"
    run.step(60)
    return run


def test_gang_timeout_fail() -> None:
    run = unschedulable_job("Fail")
    assert run.status["phase"] == "Failed"
    failed = run.condition("Failed")
    assert failed["reason"] == "GangTimeout"
    assert "1 of 2 pods unscheduled" in failed["message"]
    assert "Insufficient nvidia.com/gpu" in failed["message"]
    assert run.pods == {}


def test_gang_timeout_wait_keeps_the_pods() -> None:
    run = unschedulable_job("Wait")
    assert run.status["phase"] == "Pending"
    assert run.condition("Scheduled")["reason"] == "GangTimeout"
    assert set(run.pods) == {"job-0", "job-1"}


def test_gang_timeout_requeue_releases_the_pods_and_retries_later() -> None:
    run = unschedulable_job("Requeue")
    assert run.pods == {}
    assert run.status["phase"] == "Pending"
    assert "released its pods" in run.condition("Scheduled")["message"]
    assert run.step(10).requeue_after == pytest.approx(20)
    assert run.pods == {}
    retry = run.step(20)
    assert len(retry.create_pods) == 2
    assert run.status["attempt"] == 2
    assert run.status["restarts"] == 0


def test_pods_held_by_a_scheduling_gate_are_queued_not_late() -> None:
    run = ddp(gang={"timeoutSeconds": 60, "onTimeout": "Fail"})
    run.step()
    for name in run.pods:
        run.gated(name)
    run.step(3600)
    assert run.status["phase"] == "Pending"
    assert run.condition("Scheduled")["reason"] == "SchedulingGated"


def elastic(replicas: int = 2, **policy: Any) -> JobRun:
    limits = {"minReplicas": 2, "maxReplicas": 4, **policy}
    return JobRun(job_object("Elastic", replicas=replicas, gpusPerReplica=2, elastic=limits))


def test_elastic_scale_up_and_down_follow_spec_replicas() -> None:
    run = running(elastic())
    assert run.status["worldSize"] == 4
    run.obj["spec"]["replicas"] = 4
    up = run.step()
    assert [p["metadata"]["name"] for p in up.create_pods] == ["job-2", "job-3"]
    run.run_all()
    run.step()
    assert run.status["worldSize"] == 8
    run.obj["spec"]["replicas"] = 2
    down = run.step()
    assert down.delete_pods == ("job-3", "job-2")
    assert ("Normal", "Scaled") in run.events()
    run.step()
    assert run.status["worldSize"] == 4
    assert run.status["phase"] == "Running"


def test_elastic_keeps_running_at_min_and_refills_a_lost_pod() -> None:
    run = running(elastic(replicas=3))
    del run.pods["job-2"]  # node lost
    refill = run.step()
    assert [p["metadata"]["name"] for p in refill.create_pods] == ["job-2"]
    run.unschedulable("job-2", GPU_SHORTAGE)
    run.step(600)
    assert run.status["phase"] == "Running"
    assert run.status["worldSize"] == 4
    assert run.status["restarts"] == 0


@pytest.mark.parametrize(("action", "phase"), [("Fail", "Failed"), ("Wait", "Pending")])
def test_elastic_below_min_for_longer_than_the_grace(action: str, phase: str) -> None:
    run = running(elastic(belowMinTimeoutSeconds=120, onBelowMin=action))
    del run.pods["job-1"]
    run.step()
    run.unschedulable("job-1", GPU_SHORTAGE)
    assert run.step(60).requeue_after == pytest.approx(60)
    run.step(60)
    assert run.status["phase"] == phase
    if action == "Fail":
        assert run.condition("Failed")["reason"] == "BelowMinReplicas"


def test_elastic_job_succeeds_when_training_finishes() -> None:
    run = running(elastic(replicas=3))
    run.unschedulable("job-2", GPU_SHORTAGE)
    run.set_phase("job-0", "Succeeded", 0)
    run.set_phase("job-1", "Succeeded", 0)
    run.unschedulable("job-2", GPU_SHORTAGE)
    run.step()
    assert run.status["phase"] == "Succeeded"
    assert set(run.pods) == {"job-0", "job-1"}  # the pending one is cleaned up

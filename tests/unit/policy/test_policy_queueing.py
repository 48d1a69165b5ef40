"""Admission by Kueue (policy/steps/queueing.py): a queued job's life through decide(), with
the Workload's status written by the test as Kueue writes it."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from multigpu_operator.api import kueue
from multigpu_operator.api.spec import Job
from multigpu_operator.policy.kube.kueue_admission import admission_of
from multigpu_operator.policy.step import Decision
from multigpu_operator.reconcile import decide
from support.lifecycle import T0
from support.policy import inputs

FLAVORS = {"h100": {"spec": {"nodeLabels": {"pool": "h100"}}}}
QUEUE_FULL = (
    "couldn't assign flavors to pod set workers: insufficient unused quota for "
    "nvidia.com/gpu in flavor h100, 8 more needed"
)


def job_object(**template_spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "uid-1",
            "labels": {kueue.QUEUE_NAME_LABEL: "team-a"},
        },
        "spec": {
            "mode": "DistributedDataParallel",
            "replicas": 2,
            "gpusPerReplica": 4,
            "template": {
                "spec": {"containers": [{"name": "trainer", "image": "t:1"}], **template_spec}
            },
        },
    }


def cond(ctype: str, status: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": ctype,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-22T09:00:00Z",
    }


PENDING = {"conditions": [cond(kueue.QUOTA_RESERVED, False, "Pending", QUEUE_FULL)]}
ADMITTED = {
    "conditions": [
        cond(kueue.QUOTA_RESERVED, True, "QuotaReserved"),
        cond(kueue.ADMITTED, True, "Admitted", "The workload is admitted"),
    ],
    "admission": {
        "clusterQueue": "gpus",
        "podSetAssignments": [{"name": "workers", "flavors": {"nvidia.com/gpu": "h100"}}],
    },
}
PREEMPTED = {
    "conditions": [
        *ADMITTED["conditions"],
        cond(kueue.EVICTED, True, "Preempted", "Preempted to accommodate a higher priority"),
    ],
    "admission": ADMITTED["admission"],
}


class QueuedRun:
    """A queued job through decide(); pods appear as created and go as deleted."""

    def __init__(self, obj: dict[str, Any] | None = None) -> None:
        self.job = Job.from_object(obj or job_object())
        self.status: dict[str, Any] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.now = T0
        self.workload: dict[str, Any] | None = None

    def kueue_writes(self, status: dict[str, Any], finalizers: bool = True) -> None:
        meta: dict[str, Any] = {"name": "wl", "resourceVersion": "7", "generation": 1}
        if finalizers:
            meta["finalizers"] = [kueue.RESOURCE_IN_USE_FINALIZER]
        self.workload = {"metadata": meta, "status": copy.deepcopy(status)}

    def step(self, seconds: float = 1) -> Decision:
        self.now += timedelta(seconds=seconds)
        admission = admission_of(self.workload, FLAVORS)
        pods = list(self.pods.values())
        decision = decide(
            inputs(
                self.job,
                pods,
                self.status,
                self.now,
                queued=True,
                admission=admission,
                workload=self.workload,
            )
        )
        self.status = copy.deepcopy(decision.status.as_api())
        for name in decision.delete_pods:
            self.pods.pop(name)
        for pod in decision.create_pods:
            self.pods[pod["metadata"]["name"]] = {**pod, "status": {"phase": "Running"}}
        return decision

    def suspended(self) -> dict[str, Any]:
        return next(c for c in self.status["conditions"] if c["type"] == "Suspended")


def test_a_queued_job_waits_for_its_workload_then_for_quota_without_pods() -> None:
    run = QueuedRun()
    first = run.step()
    assert first.workload is not None
    assert first.workload.create
    assert not first.create_pods
    assert run.status["phase"] == "Suspended"
    assert run.status["reason"] == "WaitingForAdmission"
    run.kueue_writes(PENDING)
    second = run.step()
    assert second.workload is None
    assert not second.create_pods
    assert run.suspended()["message"] == (
        f"waiting for Kueue to admit the job from queue team-a: {QUEUE_FULL}"
    )


def test_admitted_the_job_starts_on_the_flavor_kueue_assigned() -> None:
    run = QueuedRun()
    run.step()
    run.kueue_writes(ADMITTED)
    decision = run.step()
    assert len(decision.create_pods) == 2
    assert all(p["spec"]["nodeSelector"] == {"pool": "h100"} for p in decision.create_pods)
    assert run.suspended()["status"] == "False"
    assert run.suspended()["reason"] == "Admitted"
    assert run.status["attempt"] == 1
    assert run.step().workload is None


def test_preempted_the_job_is_suspended_and_resumes_a_fresh_attempt_with_no_restart() -> None:
    run = QueuedRun()
    run.step()
    run.kueue_writes(ADMITTED)
    run.step()
    assert run.step().status.as_api()["phase"] == "Running"
    run.kueue_writes(PREEMPTED)
    evicted = run.step()
    assert set(evicted.delete_pods) == {"train-0", "train-1"}
    assert run.status["phase"] == "Suspended"
    assert run.status["reason"] == "Preempted"
    assert "Preempted to accommodate a higher priority" in run.suspended()["message"]
    # The quota is released once the pods are gone, as Kueue's job framework does.
    assert evicted.workload is None
    released = run.step().workload
    assert released is not None
    assert released.status is not None
    assert released.status["admission"] is None
    by_type = {c["type"]: c for c in released.status["conditions"]}
    assert by_type[kueue.QUOTA_RESERVED]["status"] == "False"
    assert by_type[kueue.ADMITTED]["status"] == "False"
    assert by_type[kueue.REQUEUED]["status"] == "True"
    assert by_type[kueue.REQUEUED]["reason"] == "Preempted"
    run.kueue_writes({"conditions": list(by_type.values())})
    assert run.step().workload is None  # released: nothing more to write
    assert run.status["reason"] == "Preempted"  # still waiting for the quota
    run.kueue_writes(ADMITTED)
    resumed = run.step()
    assert len(resumed.create_pods) == 2
    assert run.status["attempt"] == 2
    assert run.status["restarts"] == 0
    assert resumed.restarts == 0


def test_a_finished_job_finishes_its_workload_and_then_releases_it() -> None:
    run = QueuedRun()
    run.step()
    run.kueue_writes(ADMITTED)
    run.step()
    for pod in run.pods.values():
        pod["status"] = {"phase": "Succeeded"}
    finished = run.step()
    assert run.status["phase"] == "Succeeded"
    assert finished.workload is not None
    assert finished.workload.status is not None
    by_type = {c["type"]: c for c in finished.workload.status["conditions"]}
    assert by_type[kueue.FINISHED]["status"] == "True"
    assert by_type[kueue.FINISHED]["reason"] == "Succeeded"
    run.kueue_writes({"conditions": list(by_type.values())})
    release = run.step().workload
    assert release is not None
    assert release.release
    run.kueue_writes({"conditions": list(by_type.values())}, finalizers=False)
    assert run.step().workload is None


def test_a_flavor_that_contradicts_the_template_fails_the_job() -> None:
    run = QueuedRun(job_object(nodeSelector={"pool": "a100"}))
    run.step()
    run.kueue_writes(ADMITTED)
    decision = run.step()
    assert not decision.create_pods
    assert run.status["phase"] == "Failed"
    assert run.status["reason"] == "InvalidPodTemplate"
    failed = next(c for c in run.status["conditions"] if c["type"] == "Failed")
    assert "spec.template.spec.nodeSelector[pool]" in failed["message"]


def test_a_job_not_queued_in_kueue_runs_as_before() -> None:
    job = Job.from_object(job_object())
    decision = decide(inputs(job))
    assert len(decision.create_pods) == 2
    assert decision.workload is None

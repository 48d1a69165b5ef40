"""The last step of a pass: the phase from the pods, and the status written once (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import Condition, ConditionType, JobStatus, Phase
from multigpu_operator.policy.kube.conditions import Event, condition
from multigpu_operator.policy.step import Outcome
from multigpu_operator.policy.steps.status import conclude, phase_of, phase_reason
from support.policy import elastic_job, job, observed, pod, progress, running, stamp, written


def done(index: int) -> dict[str, Any]:
    return pod(index, "Succeeded", exit_code=0, node="gpu-node-0")


def crash_looping(index: int) -> dict[str, Any]:
    """A Running pod whose sidecar keeps crashing."""
    (p,) = running(index)
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}
    p["status"]["initContainerStatuses"] = [{"name": "log", "image": "l:1", "state": waiting}]
    return p


@pytest.mark.parametrize(
    ("j", "pods", "previous", "expected"),
    [
        pytest.param(job(), [], {}, Phase.PENDING, id="no-pods"),
        pytest.param(job(), [*running(0), pod(1)], {}, Phase.PENDING, id="partly-running"),
        pytest.param(job(), running(0, 1), {}, Phase.RUNNING, id="running"),
        pytest.param(job(), [*running(0), done(1)], {}, Phase.RUNNING, id="one-done"),
        pytest.param(job(), [done(0), done(1)], {}, Phase.SUCCEEDED, id="all-done"),
        pytest.param(
            job(),
            [*running(0), pod(1)],
            {"phase": "Restarting"},
            Phase.RESTARTING,
            id="restarting-until-running",
        ),
        pytest.param(
            job(), running(0, 1, attempt=2), {}, Phase.PENDING, id="other-attempts-not-counted"
        ),
        pytest.param(elastic_job(3), [*running(0, 1), pod(2)], {}, Phase.RUNNING, id="el-min"),
        pytest.param(elastic_job(3), [*running(0), pod(1)], {}, Phase.PENDING, id="el-below"),
        pytest.param(elastic_job(3), [done(0), pod(1)], {}, Phase.SUCCEEDED, id="el-one-done"),
        pytest.param(
            elastic_job(3),
            [done(0), *running(1)],
            {},
            Phase.PENDING,
            id="el-done-while-one-runs-below-min",
        ),
        pytest.param(
            job(), [*running(0), crash_looping(1)], {}, Phase.PENDING, id="a-crash-loop-runs-not"
        ),
        pytest.param(
            elastic_job(3),
            [*running(0), crash_looping(1), crash_looping(2)],
            {},
            Phase.PENDING,
            id="el-crash-loops-are-not-min-replicas",
        ),
    ],
)
def test_phase(
    j: Job, pods: list[dict[str, Any]], previous: dict[str, Any], expected: Phase
) -> None:
    assert phase_of(observed(j, pods, previous), progress()) == expected


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


RUNNING = {"phase": "Running", "conditions": [written("Created", True, "PodsCreated")]}


@pytest.mark.parametrize(
    ("j", "pods", "previous", "end", "expected"),
    [
        pytest.param(
            job(),
            [],
            {},
            Phase.PENDING,
            {"conditions": {}, "entered": Phase.PENDING, "worldSize": 2},
            id="first-pass",
        ),
        pytest.param(
            job(),
            [pod(0), pod(1)],
            {"phase": "Pending"},
            Phase.PENDING,
            {
                "conditions": {"Created": ("True", "PodsCreated")},
                "createdAttempt": 1,
                "entered": None,
                "worldSize": 2,
            },
            id="every-pod-created",
        ),
        pytest.param(
            job(),
            running(0, 1),
            {**RUNNING, "phase": "Pending"},
            Phase.RUNNING,
            {
                "conditions": {
                    "Created": ("True", "PodsCreated"),
                    "Running": ("True", "PodsRunning"),
                },
                "createdAttempt": 1,
                "entered": Phase.RUNNING,
                "worldSize": 2,
            },
            id="running",
        ),
        pytest.param(
            job(),
            [done(0), done(1)],
            {**RUNNING, "conditions": [*RUNNING["conditions"], written("Running")]},
            Phase.SUCCEEDED,
            {
                "conditions": {
                    "Created": ("True", "PodsCreated"),
                    "Running": ("False", "JobSucceeded"),
                    "Succeeded": ("True", "PodsSucceeded"),
                },
                "createdAttempt": 1,
                "entered": Phase.SUCCEEDED,
                "worldSize": 2,
            },
            id="succeeded",
        ),
        pytest.param(
            elastic_job(3),
            [*running(0, 1), pod(2)],
            RUNNING,
            Phase.RUNNING,
            {
                "conditions": {
                    "Created": ("True", "PodsCreated"),
                    "Running": ("True", "PodsRunning"),
                },
                "createdAttempt": 1,
                "entered": None,
                "worldSize": 2,
            },
            id="elastic-world-is-the-running-processes",
        ),
    ],
)
def test_conclude_conditions_and_counts(
    j: Job,
    pods: list[dict[str, Any]],
    previous: dict[str, Any],
    end: Phase,
    expected: dict[str, Any],
) -> None:
    decision = conclude(observed(j, pods, previous), progress(), Outcome(), end)
    status = decision.status.as_api()
    assert conditions(status) == expected["conditions"]
    assert status.get("createdAttempt") == expected.get("createdAttempt")
    assert decision.entered == expected["entered"]
    assert status["worldSize"] == expected["worldSize"]
    assert status["phase"] == str(end)


def test_conclude_merges_what_the_steps_decided() -> None:
    seen = observed(
        job(),
        [pod(0), pod(1, deleting=True)],
        {"attempt": 1, "restarts": 1, "unscheduledSince": stamp(-5), "targetReplicas": 2},
        now=10,
    )
    decided = Outcome(
        status=JobStatus.read({"lastFailure": {"pod": "job-1"}}),
        changes=(Event("Normal", "Requeued", "m"),),
        delete_pods=("job-1", "job-0", "job-1"),
        create_pods=({"metadata": {"name": "job-1"}},),
        wake_after=(30, 5),
    )
    moved = replace(progress(2, restarts=3, start=-60), restarted=2)  # two restarts decided
    decision = conclude(seen, moved, decided, Phase.PENDING)
    assert decision.status.as_api() == {
        "targetReplicas": 2,  # kept: not a wait in progress
        "lastFailure": {"pod": "job-1"},
        "phase": "Pending",
        "conditions": [],
        "pods": {"pending": 1, "running": 0, "succeeded": 0, "failed": 0},
        "replicas": 1,
        "selector": "multigpu.dev/job-name=job",
        "observedGeneration": 1,
        "startTime": stamp(-60),
        "attempt": 2,
        "restarts": 3,
        "worldSize": 2,
        # The current attempt, open from this pass (policy/failures/attempts.py).
        "attempts": [{"attempt": 2, "startTime": stamp(10)}],
    }
    assert decision.events == (Event("Normal", "Requeued", "m"),)
    assert decision.delete_pods == ("job-1", "job-0")
    assert decision.create_pods == ({"metadata": {"name": "job-1"}},)
    assert decision.requeue_after == 5
    assert decision.restarts == 2


@pytest.mark.parametrize("end", [Phase.SUCCEEDED, Phase.FAILED])
def test_a_finished_pass_creates_nothing_and_claims_no_new_attempt(end: Phase) -> None:
    decided = Outcome(
        create_pods=({"metadata": {"name": "job-1"}},),
        changes=(condition(ConditionType.FAILED, True, "r", "m"),),
    )
    decision = conclude(observed(job(), [pod(0), pod(1)]), progress(), decided, end)
    assert decision.create_pods == ()
    assert "Created" not in conditions(decision.status.as_api())


def cond(ctype: str, status: bool, reason: str) -> dict[str, Any]:
    return written(ctype, status, reason)


@pytest.mark.parametrize(
    ("phase", "conditions", "reason"),
    [
        pytest.param(Phase.PENDING, [cond("Created", True, "PodsCreated")], None, id="created"),
        pytest.param(
            Phase.PENDING,
            [cond("Scheduled", False, "Unschedulable"), cond("Running", False, "ErrImagePull")],
            "ErrImagePull",
            id="a-container-problem-before-a-busy-cluster",
        ),
        pytest.param(
            Phase.PENDING,
            [cond("Scheduled", False, "NoNodeFits"), cond("Running", False, "ErrImagePull")],
            "NoNodeFits",
            id="no-node-fits-before-all",
        ),
        pytest.param(
            Phase.PENDING, [cond("Scheduled", False, "GangTimeout")], "GangTimeout", id="requeued"
        ),
        pytest.param(
            Phase.PENDING,
            [cond("Scheduled", True, "PodsScheduled"), cond("Running", False, "PodsStarting")],
            None,
            id="nothing-holds-it",
        ),
        pytest.param(
            Phase.PENDING,
            [cond("Running", False, "BelowMinReplicas")],
            "BelowMinReplicas",
            id="elastic-below-min",
        ),
        pytest.param(
            Phase.RESTARTING,
            [cond("Restarting", True, "PodFailed"), cond("Running", False, "Restarting")],
            "PodFailed",
            id="restarting",
        ),
        pytest.param(
            Phase.RESTARTING,
            [cond("Restarting", True, "PodFailed"), cond("Running", False, "ImagePullBackOff")],
            "ImagePullBackOff",
            id="restarting-held-up",
        ),
        pytest.param(Phase.RUNNING, [cond("Running", True, "PodsRunning")], "PodsRunning", id="r"),
        pytest.param(
            Phase.FAILED,
            [cond("Running", False, "ImagePullBackOff"), cond("Failed", True, "ImagePullBackOff")],
            "ImagePullBackOff",
            id="failed",
        ),
        pytest.param(
            Phase.SUCCEEDED, [cond("Succeeded", True, "PodsSucceeded")], "PodsSucceeded", id="s"
        ),
        pytest.param(Phase.SUSPENDED, [cond("Suspended", True, "Suspended")], "Suspended", id="z"),
    ],
)
def test_phase_reason(phase: Phase, conditions: list[dict[str, Any]], reason: str | None) -> None:
    listed = [Condition.model_validate(c) for c in conditions]
    assert phase_reason(phase, listed) == reason


def test_the_reason_is_derived_again_by_every_pass() -> None:
    previous = {"phase": "Pending", "reason": "ErrImagePull", "conditions": []}
    decision = conclude(
        observed(job(), [pod(0), pod(1)], previous), progress(), Outcome(), Phase.PENDING
    )
    assert "reason" not in decision.status.as_api()
    decided = Outcome(changes=(condition(ConditionType.SCHEDULED, False, "NoNodeFits", "m"),))
    decision = conclude(
        observed(job(), [pod(0), pod(1)], previous), progress(), decided, Phase.PENDING
    )
    assert decision.status.as_api()["reason"] == "NoNodeFits"


def test_an_elastic_job_that_trains_names_the_pod_that_cannot_start() -> None:
    (stuck,) = running(2)
    stuck["status"] = {
        "phase": "Pending",
        "containerStatuses": [
            {"name": "trainer", "image": "i:2", "state": {"waiting": {"reason": "ErrImagePull"}}}
        ],
    }
    seen = observed(elastic_job(3), [*running(0, 1), stuck], {"phase": "Running"})
    decision = conclude(seen, progress(), Outcome(), Phase.RUNNING)
    (cond_running,) = [c for c in decision.status.as_api()["conditions"] if c["type"] == "Running"]
    assert (cond_running["status"], cond_running["reason"]) == ("True", "PodsRunning")
    assert cond_running["message"] == (
        '2 pods running; pod job-2 (replica 2) container trainer: ErrImagePull (image "i:2")'
    )

"""Job status from observed pods: phases, conditions, events, counts."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.policy.status import (
    Phase,
    StatusUpdate,
    count_pods,
    derive_status,
    first_failure,
)

NOW = "2026-11-22T10:00:00Z"


def pod(index: int, phase: str, exit_code: int | None = None, reason: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [
            {
                "name": "trainer",
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "finishedAt": f"2026-11-22T09:00:0{index}Z",
                    }
                },
            }
        ]
    return {
        "metadata": {"name": f"job-{index}", "labels": {"multigpu.dev/replica-index": str(index)}},
        "status": status,
    }


def derive(
    pods: list[dict[str, Any]], previous: dict[str, Any] | None = None, expected: int = 2
) -> StatusUpdate:
    return derive_status(
        job_name="job",
        generation=3,
        expected_pods=expected,
        world_size=expected * 2,
        pods=pods,
        previous=previous or {},
        now=NOW,
        all_created=len(pods) >= expected,
    )


@pytest.mark.parametrize(
    ("phases", "expected_phase", "true_conditions"),
    [
        pytest.param([], Phase.PENDING, set(), id="no-pods-yet"),
        pytest.param(["Pending", "Pending"], Phase.PENDING, {"Created"}, id="created"),
        pytest.param(["Running", "Pending"], Phase.PENDING, {"Created"}, id="partly-running"),
        pytest.param(["Running", "Running"], Phase.RUNNING, {"Created", "Running"}, id="running"),
        pytest.param(
            ["Succeeded", "Running"], Phase.RUNNING, {"Created", "Running"}, id="one-finished"
        ),
        pytest.param(
            ["Succeeded", "Succeeded"], Phase.SUCCEEDED, {"Created", "Succeeded"}, id="succeeded"
        ),
    ],
)
def test_phase_and_conditions_follow_the_pods(
    phases: list[str], expected_phase: Phase, true_conditions: set[str]
) -> None:
    update = derive([pod(i, ph) for i, ph in enumerate(phases)])

    assert update.status["phase"] == expected_phase
    true = {c["type"] for c in update.status["conditions"] if c["status"] == "True"}
    assert true == true_conditions


def test_a_failed_rank_fails_the_job_with_its_exit_code_and_reason() -> None:
    update = derive([pod(0, "Running"), pod(1, "Failed", 137, "OOMKilled")])

    assert update.status["phase"] == Phase.FAILED
    failed = next(c for c in update.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "PodFailed"
    assert failed["message"] == "pod job-1 (replica 1) failed with exit code 137: OOMKilled"
    assert [(e.type, e.reason) for e in update.events] == [
        ("Normal", "PodsCreated"),
        ("Warning", "PodFailed"),
    ]


def test_the_first_failure_is_reported_when_several_ranks_fail() -> None:
    failure = first_failure([pod(1, "Failed", 1, "Error"), pod(0, "Failed", 134, "Error")])
    assert failure is not None
    assert (failure.pod, failure.exit_code) == ("job-0", 134)


def test_terminal_phase_never_changes_back() -> None:
    done = derive([pod(0, "Succeeded"), pod(1, "Succeeded")]).status

    later = derive([pod(0, "Failed", 1, "Error")], previous=done)

    assert later.status["phase"] == Phase.SUCCEEDED
    assert later.status["completionTime"] == done["completionTime"]
    assert later.events == ()


def test_conditions_transition_once_and_keep_their_time() -> None:
    first = derive([pod(0, "Running"), pod(1, "Running")])
    again = derive_status(
        job_name="job",
        generation=3,
        expected_pods=2,
        world_size=4,
        pods=[pod(0, "Running"), pod(1, "Running")],
        previous=first.status,
        now="2026-11-22T11:00:00Z",
        all_created=True,
    )

    assert again.events == ()
    assert again.entered is None
    assert again.status["conditions"] == first.status["conditions"]
    assert again.status["startTime"] == NOW


def test_status_carries_counts_world_size_selector_and_generation() -> None:
    status = derive([pod(0, "Running"), pod(1, "Pending")]).status

    assert status["pods"] == {"pending": 1, "running": 1, "succeeded": 0, "failed": 0}
    assert status["replicas"] == 2
    assert status["worldSize"] == 4
    assert status["selector"] == "multigpu.dev/job-name=job"
    assert status["observedGeneration"] == 3


def test_pods_being_deleted_are_not_counted() -> None:
    leaving = pod(0, "Running")
    leaving["metadata"]["deletionTimestamp"] = NOW
    assert count_pods([leaving, pod(1, "Running")]).running == 1

"""The shapes of a pass: merging outcomes, the snapshot a step reads, the counters (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.kube.conditions import Event, condition
from multigpu_operator.policy.step import Outcome, Progress, merged
from support.policy import T0, at, elastic_job, job, observed, pod, progress

RESTARTING = condition(ConditionType.RESTARTING, True, "PodFailed", "m")
SCALED = Event("Normal", "Scaled", "m")


@pytest.mark.parametrize(
    ("first", "later", "expected"),
    [
        pytest.param(Outcome(), Outcome(), Outcome(), id="empty"),
        pytest.param(
            Outcome(status=JobStatus(attempt=1, restarts=1)),
            Outcome(status=JobStatus(restarts=2)),
            Outcome(status=JobStatus(attempt=1, restarts=2)),
            id="later-status-fields-win",
        ),
        pytest.param(
            Outcome(changes=(RESTARTING,), delete_pods=("job-1",), wake_after=(5,)),
            Outcome(changes=(SCALED,), delete_pods=("job-0", "job-1"), wake_after=(3,)),
            Outcome(
                changes=(RESTARTING, SCALED),
                delete_pods=("job-1", "job-0", "job-1"),
                wake_after=(5, 3),
            ),
            id="lists-keep-the-order-decided",
        ),
        pytest.param(
            Outcome(delete_job=True, progress=progress(2)),
            Outcome(),
            Outcome(delete_job=True, progress=progress(2)),
            id="an-empty-later-step-keeps-what-was-decided",
        ),
        pytest.param(
            Outcome(progress=progress(2)),
            Outcome(progress=progress(3), stop=Phase.RESTARTING),
            Outcome(progress=progress(3), stop=Phase.RESTARTING),
            id="later-counters-and-stop-win",
        ),
    ],
)
def test_outcomes_merge_in_order(first: Outcome, later: Outcome, expected: Outcome) -> None:
    assert first.then(later) == expected
    assert merged([first, later]) == expected


def test_a_pass_merges_its_outcomes_at_once() -> None:
    steps = [
        Outcome(delete_pods=("job-0",), progress=progress(2)),
        Outcome(),
        Outcome(delete_pods=("job-1",), stop=Phase.PENDING),
    ]
    assert merged(steps) == Outcome(
        delete_pods=("job-0", "job-1"), progress=progress(2), stop=Phase.PENDING
    )
    assert merged([]) == Outcome()


@pytest.mark.parametrize(
    ("elastic", "pods", "attempt", "current"),
    [
        pytest.param(
            False,
            [pod(0, attempt=1), pod(1, attempt=2), pod(2, attempt=3)],
            2,
            ["job-1"],
            id="ddp-only-this-attempt",
        ),
        pytest.param(
            True,
            [pod(0, attempt=1), pod(1, attempt=2), pod(2, attempt=3)],
            2,
            ["job-0", "job-1"],
            id="elastic-every-attempt-up-to-this-one",
        ),
        pytest.param(
            False, [pod(0), pod(1, deleting=True)], 1, ["job-0"], id="pods-being-deleted-left-out"
        ),
    ],
)
def test_current_pods(
    elastic: bool, pods: list[dict[str, Any]], attempt: int, current: list[str]
) -> None:
    seen = observed(elastic_job() if elastic else job(), pods)
    assert [p["metadata"]["name"] for p in seen.current(attempt)] == current


def test_older_and_up_to_an_attempt() -> None:
    seen = observed(pods=[pod(0, attempt=1), pod(1, attempt=2), pod(2, attempt=1, deleting=True)])
    assert [p["metadata"]["name"] for p in seen.older(2)] == ["job-0"]
    assert seen.older(1) == ()
    assert [p["metadata"]["name"] for p in seen.up_to(1)] == ["job-0"]
    assert [p["metadata"]["name"] for p in seen.up_to(2)] == ["job-0", "job-1"]


@pytest.mark.parametrize(
    ("previous", "expected"),
    [
        pytest.param({}, Progress(1, 0, T0), id="first-pass"),
        pytest.param(
            {"attempt": 3, "restarts": 2, "startTime": "2026-11-22T09:00:00Z"},
            Progress(3, 2, at(-3600)),
            id="from-the-status",
        ),
    ],
)
def test_progress_starts_from_the_previous_status(
    previous: dict[str, Any], expected: Progress
) -> None:
    assert Progress.from_status(JobStatus.read(previous), T0) == expected


@pytest.mark.parametrize(
    ("previous", "phase", "had_running"),
    [
        pytest.param({}, None, False, id="new"),
        pytest.param(
            {"phase": "Running", "conditions": [{"type": "Running", "status": "False"}]},
            Phase.RUNNING,
            True,
            id="a-false-condition-was-had",
        ),
    ],
)
def test_what_the_previous_status_says(
    previous: dict[str, Any], phase: Phase | None, had_running: bool
) -> None:
    seen = observed(previous=previous)
    assert seen.previous_phase == phase
    assert seen.had_condition(ConditionType.RUNNING) is had_running

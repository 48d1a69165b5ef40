"""Suspend deletes the pods; resume starts a fresh attempt and the deadline clock (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.status import ConditionType, Phase
from multigpu_operator.policy.kube.conditions import Event, cleared, condition
from multigpu_operator.policy.step import Outcome
from multigpu_operator.policy.steps.suspension import suspend_or_resume
from support.policy import at, job, observed, pod, progress

SUSPENDED = "spec.suspend is true: the job's pods are deleted until it is resumed"


def resumed(attempt: int) -> tuple[Any, ...]:
    msg = f"spec.suspend is false: starting attempt {attempt}"
    return (
        condition(ConditionType.SUSPENDED, False, "Resumed", msg),
        Event("Normal", "Resumed", msg),
    )


@pytest.mark.parametrize(
    ("suspend", "previous", "pods", "expected"),
    [
        pytest.param(False, {"phase": "Running"}, [pod(0)], Outcome(), id="running-untouched"),
        pytest.param(
            True,
            {"phase": "Running", "attempt": 2},
            [pod(0, attempt=2), pod(1, attempt=3), pod(2, attempt=1, deleting=True)],
            Outcome(
                delete_pods=("job-0",),
                changes=(
                    condition(ConditionType.SUSPENDED, True, "Suspended", SUSPENDED),
                    cleared(ConditionType.RUNNING, "Suspended", SUSPENDED),
                ),
                stop=Phase.SUSPENDED,
            ),
            id="suspend-leaves-a-newer-attempt-alone",
        ),
        pytest.param(
            False,
            {"phase": "Suspended", "attempt": 2, "createdAttempt": 2},
            [],
            Outcome(changes=resumed(3), progress=progress(3, start=50)),
            id="resume-a-fresh-attempt",
        ),
        pytest.param(
            False,
            {"phase": "Suspended"},
            [],
            Outcome(changes=resumed(1), progress=progress(1, start=50)),
            id="created-suspended-starts-attempt-1",
        ),
    ],
)
def test_suspend_or_resume(
    suspend: bool, previous: dict[str, Any], pods: list[dict[str, Any]], expected: Outcome
) -> None:
    seen = observed(job(suspend=suspend), pods, previous, now=50)
    got = suspend_or_resume(seen, progress(int(previous.get("attempt", 1))))
    assert got == expected


def test_resume_keeps_the_restarts() -> None:
    seen = observed(job(), [], {"phase": "Suspended", "createdAttempt": 2}, now=50)
    got = suspend_or_resume(seen, progress(2, restarts=1))
    assert got.progress is not None
    assert (got.progress.restarts, got.progress.start) == (1, at(50))

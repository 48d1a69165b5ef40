"""After a gang timeout with Requeue: no pods until requeueAt, then a fresh attempt (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.policy.kube.conditions import Event
from multigpu_operator.policy.step import Outcome
from multigpu_operator.policy.steps.requeue import wait_to_requeue
from support.policy import observed, pod, progress, stamp


@pytest.mark.parametrize(
    ("previous", "pods", "now", "expected"),
    [
        pytest.param({}, [pod(0)], 0, Outcome(), id="no-requeue"),
        pytest.param(
            {"requeueAt": stamp(30)},
            [pod(0, attempt=1), pod(1, attempt=2)],
            10,
            Outcome(
                status=JobStatus.read({"requeueAt": stamp(30)}),
                delete_pods=("job-0",),
                wake_after=(20.0,),
                stop=Phase.PENDING,
            ),
            id="waiting-keeps-the-time-and-releases-the-pods",
        ),
        pytest.param(
            {"requeueAt": stamp(30)},
            [],
            30,
            Outcome(
                changes=(Event("Normal", "Requeued", "gang timeout passed: starting attempt 2"),),
                progress=progress(2),
            ),
            id="due-a-fresh-attempt",
        ),
    ],
)
def test_wait_to_requeue(
    previous: dict[str, Any], pods: list[dict[str, Any]], now: float, expected: Outcome
) -> None:
    assert wait_to_requeue(observed(pods=pods, previous=previous, now=now), progress()) == expected

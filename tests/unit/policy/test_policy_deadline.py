"""runPolicy.activeDeadlineSeconds counts from the start (or the last resume) (pure)."""

from __future__ import annotations

import pytest

from multigpu_operator.api.limits import MAX_JOB_SECONDS
from multigpu_operator.api.status import Phase
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.steps.deadline import active_deadline
from support.policy import job, observed, progress


@pytest.mark.parametrize(
    ("deadline", "start", "now", "wake", "stop"),
    [
        pytest.param(None, 0, 10**6, (), None, id="no-deadline"),
        pytest.param(30, 0, 10, (20.0,), None, id="wakes-when-due"),
        pytest.param(30, 100, 110, (20.0,), None, id="counts-from-the-start-or-resume"),
        pytest.param(30, 0, 30, (), Phase.FAILED, id="due-now-fails"),
        pytest.param(30, 0, 45, (), Phase.FAILED, id="past-fails"),
        # The API's largest deadline (bigger ones are refused) is waited for.
        pytest.param(
            MAX_JOB_SECONDS, 0, 10, (MAX_JOB_SECONDS - 10.0,), None, id="the-largest-waits"
        ),
    ],
)
def test_active_deadline(
    deadline: int | None, start: float, now: float, wake: tuple[float, ...], stop: Phase | None
) -> None:
    seen = observed(job(runPolicy={"activeDeadlineSeconds": deadline}), now=now)
    outcome = active_deadline(seen, progress(start=start))
    assert outcome.wake_after == wake
    assert outcome.stop == stop


def test_the_failure_names_the_deadline() -> None:
    seen = observed(job(runPolicy={"activeDeadlineSeconds": 30}), now=30)
    message = "the job ran longer than runPolicy.activeDeadlineSeconds (30s)"
    assert active_deadline(seen, progress()) == fail("DeadlineExceeded", message)

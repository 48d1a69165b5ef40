"""runPolicy.activeDeadlineSeconds (pure): counted from status.startTime (the first
reconcile, or the last resume); when it passes, the job fails."""

from __future__ import annotations

from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.step import Observed, Outcome, Progress


def active_deadline(seen: Observed, progress: Progress) -> Outcome:
    deadline = seen.job.spec.run_policy.active_deadline_seconds
    if deadline is None:
        return Outcome()
    # In seconds, not datetimes: start + a deadline the schema allows (an int64) can be
    # past datetime.max (year 9999), an OverflowError that would leave the job without
    # a status. A float holds every int64.
    left = deadline - (seen.now - progress.start).total_seconds()
    if left <= 0:
        return fail(
            "DeadlineExceeded",
            f"the job ran longer than runPolicy.activeDeadlineSeconds ({deadline}s)",
        )
    return Outcome(wake_after=(left,))

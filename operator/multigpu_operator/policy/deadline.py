"""runPolicy.activeDeadlineSeconds (pure): counted from status.startTime (the first
reconcile, or the last resume); when it passes, the job fails."""

from __future__ import annotations

from datetime import timedelta

from multigpu_operator.policy.fail import fail
from multigpu_operator.policy.step import Observed, Outcome, Progress


def active_deadline(seen: Observed, progress: Progress) -> Outcome:
    deadline = seen.job.spec.run_policy.active_deadline_seconds
    if deadline is None:
        return Outcome()
    left = (progress.start + timedelta(seconds=deadline) - seen.now).total_seconds()
    if left <= 0:
        return fail(
            "DeadlineExceeded",
            f"the job ran longer than runPolicy.activeDeadlineSeconds ({deadline}s)",
        )
    return Outcome(wake_after=(left,))

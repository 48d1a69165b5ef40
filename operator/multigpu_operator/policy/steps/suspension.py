"""Suspend and resume (pure): a suspended job has no pods; resuming starts a fresh
attempt, not counted as a restart, and restarts the deadline clock."""

from __future__ import annotations

from multigpu_operator.api.status import ConditionType, Phase
from multigpu_operator.policy.kube.conditions import Event, cleared, condition
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.step import Observed, Outcome, Progress


def suspend_or_resume(seen: Observed, progress: Progress) -> Outcome:
    if seen.job.spec.suspend:
        return suspend(seen, progress)
    if seen.previous_phase is Phase.SUSPENDED and seen.admission is None:
        # (A job queued in Kueue resumes when Kueue admits it: policy/steps/queueing.py.)
        return resume(seen, progress)
    return Outcome()


def suspend(seen: Observed, progress: Progress) -> Outcome:
    """The pass ends Suspended; the pods go (not those of a newer attempt, seen through a
    stale status)."""
    msg = "spec.suspend is true: the job's pods are deleted until it is resumed"
    return Outcome(
        delete_pods=tuple(name_of(p) for p in seen.up_to(progress.attempt)),
        changes=(
            condition(ConditionType.SUSPENDED, True, "Suspended", msg),
            cleared(ConditionType.RUNNING, "Suspended", msg),
        ),
        stop=Phase.SUSPENDED,
    )


def resume(seen: Observed, progress: Progress) -> Outcome:
    resumed = progress.resumed(seen)
    msg = f"spec.suspend is false: starting attempt {resumed.attempt}"
    return Outcome(
        changes=(
            condition(ConditionType.SUSPENDED, False, "Resumed", msg),
            Event("Normal", "Resumed", msg),
        ),
        progress=resumed,
    )

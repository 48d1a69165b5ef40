"""The wait after a gang timeout with onTimeout Requeue (pure): until status.requeueAt the
job has no pods; then a fresh attempt starts, not counted as a restart."""

from __future__ import annotations

from dataclasses import replace

from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.policy.kube.conditions import Event
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.step import Observed, Outcome, Progress


def wait_to_requeue(seen: Observed, progress: Progress) -> Outcome:
    at = seen.previous.requeue_at
    if at is None:
        return Outcome()
    if seen.now < at:
        return Outcome(
            status=JobStatus(requeue_at=at),
            delete_pods=tuple(name_of(p) for p in seen.current(progress.attempt)),
            wake_after=((at - seen.now).total_seconds(),),
            stop=Phase.PENDING,
        )
    attempt = progress.attempt + 1
    return Outcome(
        changes=(Event("Normal", "Requeued", f"gang timeout passed: starting attempt {attempt}"),),
        progress=replace(progress, attempt=attempt),
    )

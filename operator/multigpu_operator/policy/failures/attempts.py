"""status.attempts: the latest attempts of a job, each with when it started and ended,
why it ended, the rule that decided what followed and its failed pods (pure).

The current attempt is the last entry, without an end, from the pass that planned its
pods; the pass that ends it (a failure decided, the job finished, a new attempt begun
by a resume or a requeue) closes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from multigpu_operator.api.limits import MAX_ATTEMPTS_KEPT, MAX_FAILED_PODS_KEPT
from multigpu_operator.api.status import Attempt, JobStatus
from multigpu_operator.policy.failures.failed_pods import Failure


def ended(
    status: JobStatus,
    attempt: int,
    now: datetime,
    reason: str,
    rule: str,
    failed: Sequence[Failure],
) -> list[Attempt]:
    """The attempts with `attempt` closed by a decided failure."""
    pods = [f.as_failed_pod() for f in failed[:MAX_FAILED_PODS_KEPT]]
    record = _attempt(
        attempt=attempt,
        start_time=_started(status, attempt, now),
        end_time=now,
        reason=reason,
        rule=rule,
        failed_pods=pods,
    )
    return _kept([*(a for a in status.attempts or [] if a.attempt != attempt), record])


def brought_up_to_date(
    status: JobStatus, attempt: int, now: datetime, reason: str, *, ended: bool, runs: bool
) -> list[Attempt]:
    """Every earlier attempt closed (with `reason` if nothing closed it), and the
    current one closed too if it `ended` (the job finished or was suspended); the
    current one is listed (opened) if it `runs` or has finished."""
    records = []
    for record in status.attempts or []:
        if record.end_time is None and (record.attempt < attempt or ended):
            closed = {"end_time": now, **({"reason": reason} if reason else {})}
            record = Attempt.model_validate(record.model_dump(exclude_unset=True) | closed)
        records.append(record)
    if runs and not any(r.attempt == attempt for r in records):
        end = {"end_time": now, "reason": reason} if ended else {}
        records.append(_attempt(attempt=attempt, start_time=now, **end))
    return _kept(records)


def _attempt(**fields: Any) -> Attempt:
    """An Attempt with the fields that have a value (the others stay unset: absent
    from the status, not null)."""
    return Attempt(**{k: v for k, v in fields.items() if v not in (None, "", [])})


def _started(status: JobStatus, attempt: int, now: datetime) -> datetime | None:
    found = [a.start_time for a in status.attempts or [] if a.attempt == attempt]
    return found[0] if found else now


def _kept(records: list[Attempt]) -> list[Attempt]:
    return sorted(records, key=lambda a: a.attempt)[-MAX_ATTEMPTS_KEPT:]

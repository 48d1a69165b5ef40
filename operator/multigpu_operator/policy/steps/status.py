"""The last step of a pass (pure): the phase the pods put the job in, and the status
written once at the end, with the conditions and events of every step before.

docs/lifecycle.md describes phases and conditions for users.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.status import (
    TERMINAL,
    Attempt,
    Condition,
    ConditionType,
    JobStatus,
    Phase,
)
from multigpu_operator.policy.failures.attempts import brought_up_to_date
from multigpu_operator.policy.kube.conditions import ConditionChange, Conditions, cleared, condition
from multigpu_operator.policy.kube.pods import count_pods, name_of
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Decision, Observed, Outcome, Progress
from multigpu_operator.policy.steps.containers import NOT_STARTING, container_problems, summary
from multigpu_operator.policy.steps.gang import NO_NODE_FITS
from multigpu_operator.policy.steps.placement import NO_DOMAIN_FITS

# Status fields that describe a wait in progress: dropped unless this pass re-sets them.
_TRANSIENT = (
    "unscheduled_since",
    "below_min_since",
    "requeue_at",
    "counted_failures",
    "cannot_start_since",
)
# Derived again by every pass from the conditions it leaves.
_DERIVED = ("reason",)
# Fields that only count the pods. A status that changes in these alone (a 3rd of 8 pods
# running) is written at most this often, the latest counts at once with any other
# change (the job Running): one write per pod was most of a job's API requests.
COUNT_FIELDS = frozenset({"pods", "replicas"})
COUNTS_WRITE_SECONDS = 5.0
# Running=False reasons that say why a job that is not finished has not started.
_HELD_UP = NOT_STARTING | {"BelowMinReplicas"}


def phase_of(seen: Observed, progress: Progress) -> Phase:
    """The phase of a pass that no step ended: from the current attempt's pods."""
    counts = count_pods(seen.current(progress.attempt))
    expected = len(seen.desired.pods)
    policy = seen.job.spec.elastic
    if seen.elastic and policy:
        if counts.succeeded and not counts.running:
            return Phase.SUCCEEDED
        if counts.running >= policy.min_replicas:
            return Phase.RUNNING
    elif counts.succeeded >= expected:
        return Phase.SUCCEEDED
    elif counts.running + counts.succeeded >= expected:
        return Phase.RUNNING
    return Phase.RESTARTING if seen.previous_phase is Phase.RESTARTING else Phase.PENDING


def conclude(seen: Observed, progress: Progress, decided: Outcome, phase: Phase) -> Decision:
    """The pass's Decision: what the steps decided, ending in `phase`."""
    job, spec = seen.job, seen.job.spec
    current = seen.current(progress.attempt)
    running = count_pods(current).running
    status = seen.previous.without(*_TRANSIENT, *_DERIVED).merged(decided.status)
    changes = [*decided.changes, *_phase_conditions(seen, progress, phase, running)]
    # The fields this pass sets, validated and merged once (a JobStatus is validated
    # when built, and a pass runs for every change of every pod).
    fields: dict[str, Any] = {}
    present = {name_of(p) for p in current}
    if all(name_of(p) in present for p in seen.desired.pods):
        fields["created_attempt"] = progress.attempt
        if phase not in TERMINAL:
            msg = (
                f"created {len(seen.desired.pods)} pods and the headless Service "
                f"(attempt {progress.attempt})"
            )
            if seen.avoidance:
                msg += f"; {seen.avoidance}"
            changes.append(condition(ConditionType.CREATED, True, "PodsCreated", msg))
    conditions = Conditions(seen.previous, job.generation, seen.now)
    conditions.apply(changes)
    listed = conditions.as_list()
    reason = phase_reason(phase, listed)
    if reason:
        fields["reason"] = reason
    if not (phase in TERMINAL and seen.previous_phase in TERMINAL):  # history stays put
        records = _attempts(seen, progress, status, phase, reason or status.reason)
        if records:
            fields["attempts"] = records
    counts = count_pods(seen.live)
    world = running * spec.processes_per_replica if seen.elastic else seen.desired.world_size
    passed = JobStatus(
        **fields,
        phase=phase,
        conditions=listed,
        pods=counts.as_status(),
        replicas=counts.total,
        selector=names.job_selector(job.ref.name),
        observed_generation=job.generation,
        start_time=rfc3339(progress.start),
        attempt=progress.attempt,
        restarts=progress.restarts,
        world_size=world or 0,
    )
    return Decision(
        status=status.merged(passed),
        events=tuple(conditions.events),
        entered=phase if phase != seen.previous_phase else None,
        create_pods=decided.create_pods if phase not in TERMINAL else (),
        deletes=_with_uids(seen, decided.delete_pods),
        delete_job=decided.delete_job,
        requeue_after=min(decided.wake_after) if decided.wake_after else None,
        restarts=progress.restarted,
    )


def _with_uids(seen: Observed, names: Sequence[str]) -> tuple[tuple[str, str | None], ...]:
    """Each pod to delete (once) with the UID of the pod of that name this pass saw
    (not one already gone: Observed.gone)."""
    gone = {p["metadata"].get("uid") for p in seen.gone}
    uids = {name_of(p): uid for p in seen.pods if (uid := p["metadata"].get("uid")) not in gone}
    return tuple((name, uids.get(name)) for name in dict.fromkeys(names))


def _attempts(
    seen: Observed, progress: Progress, status: JobStatus, phase: Phase, reason_now: str | None
) -> list[Attempt]:
    """status.attempts with the current attempt open, or closed once the job finished
    or was suspended; an attempt left without a failure (a resume, a requeue) ends for
    what the job was in before. `reason_now`: the status.reason this pass leaves."""
    finished = phase in TERMINAL
    ended = finished or phase is Phase.SUSPENDED
    before = str(seen.previous.reason or seen.previous.phase or "")
    reason = (reason_now or str(phase)) if ended else before
    runs = finished or phase is not Phase.SUSPENDED
    return brought_up_to_date(status, progress.attempt, seen.now, reason, ended=ended, runs=runs)


def first_write_waits(previous: JobStatus, decision: Decision) -> bool:
    """Whether a job's first status may wait for its pods: a pass that creates the pods
    of attempt 1 of a job whose status was never written, with nothing to say but
    Pending. Counters go to the status before any pod (a crash must not lose an
    attempt), but attempt 1 and 0 restarts are what any later pass derives from an empty
    status: the first write, with Created, follows once the watch shows the pods, and a
    normal job costs two status writes, not three."""
    status = decision.status
    return (
        not previous.model_fields_set
        and bool(decision.create_pods)
        and not decision.events
        and status.phase is Phase.PENDING
        and status.attempt == 1
        and not status.restarts
    )


def counts_only(previous: JobStatus, status: JobStatus) -> bool:
    """Whether `status` differs from `previous` only in the pod counts."""
    fields = previous.model_fields_set | status.model_fields_set
    changed = {f for f in fields if getattr(previous, f) != getattr(status, f)}
    return bool(changed) and changed <= COUNT_FIELDS


def counts_held_for(
    previous: JobStatus, status: JobStatus, held_since: datetime | None, now: datetime
) -> float:
    """Seconds to hold back the write of `status`, 0 to write it now: a status that only
    changes pod counts is written at most every COUNTS_WRITE_SECONDS from when such a
    write was first held (`held_since`; None: none is held), any other change at once,
    taking the latest counts along."""
    if not counts_only(previous, status):
        return 0.0
    since = held_since or now
    return max((since - now).total_seconds() + COUNTS_WRITE_SECONDS, 0.0)


def phase_reason(phase: Phase, conditions: Sequence[Condition]) -> str | None:
    """status.reason: the reason of the condition that explains `phase`, like a Pod's
    status.reason; None when nothing needs explaining (pods just created)."""
    by_type = {c.type: c for c in conditions}

    def reason(ctype: ConditionType, status: str = "True") -> str | None:
        cond = by_type.get(ctype)
        return cond.reason if cond and cond.status == status and cond.reason else None

    explained_by = {
        Phase.FAILED: ConditionType.FAILED,
        Phase.SUCCEEDED: ConditionType.SUCCEEDED,
        Phase.SUSPENDED: ConditionType.SUSPENDED,
        Phase.RUNNING: ConditionType.RUNNING,
    }
    if phase in explained_by:
        return reason(explained_by[phase])
    # Pending or Restarting: what holds the pods up, the most lasting cause first.
    unscheduled = reason(ConditionType.SCHEDULED, "False")
    held_up = reason(ConditionType.RUNNING, "False")
    if unscheduled in (NO_NODE_FITS, NO_DOMAIN_FITS):
        return unscheduled
    if held_up in _HELD_UP:
        return held_up
    if unscheduled:
        return unscheduled
    return reason(ConditionType.RESTARTING) if phase is Phase.RESTARTING else None


def _phase_conditions(
    seen: Observed, progress: Progress, phase: Phase, running: int
) -> list[ConditionChange]:
    if phase is Phase.SUCCEEDED and seen.previous_phase is not Phase.SUCCEEDED:
        msg = (
            "training finished" if seen.elastic else f"all {len(seen.desired.pods)} pods succeeded"
        )
        return [
            cleared(ConditionType.RUNNING, "JobSucceeded", msg),
            condition(ConditionType.SUCCEEDED, True, "PodsSucceeded", msg),
        ]
    if phase is Phase.RUNNING:
        msg = f"{running} pods running"
        # Elastic: a job may train while some of its pods cannot start; say which.
        problems = summary(container_problems(seen.current(progress.attempt)))
        if problems:
            msg += f"; {problems}"
        return [
            condition(ConditionType.RUNNING, True, "PodsRunning", msg),
            cleared(ConditionType.RESTARTING, "Recovered", msg),
        ]
    return []

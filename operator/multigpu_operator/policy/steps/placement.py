"""spec.placement in the pass (pure): the domains recorded in the status, no domain that
could ever hold the job said at once, and another domain chosen when the gang cannot
start where it is.

The choice itself is policy/placement/ (made before the steps, in reconcile.observe, so
that every step and the pods created see the same one). Here:
- NoDomainFits: no domain of the level could ever hold the job (its nodes' allocatable,
  running nothing else). No pods are created; condition Scheduled False with the level,
  what the job needs and the largest domain, and a Warning event, at once; after
  gang.timeoutSeconds the job fails with NoDomainFits unless onTimeout is Wait (a node
  may still join meanwhile). Distinct from waiting for busy GPUs (Unschedulable).
- The scheduler turns a pod of the gang away in the chosen domains (the operator guessed
  from its own pods, and other workloads fill the domain), and none of its pods is placed
  yet, or some are and the gang did not start within gang.timeoutSeconds: while another
  domain that holds the job now (as far as the operator knows) was not tried, its pods
  are deleted, the domains are recorded in status.placement.tried, and the next attempt
  (not counted as a restart) chooses again. Otherwise (a busy cluster, every domain tried: the job
  moves no more) the gang waits and gang.onTimeout applies as for any job
  (policy/steps/gang.py): with Requeue, the next attempt chooses again.
"""

from __future__ import annotations

from datetime import timedelta

from multigpu_operator.api.lifecycle import GangTimeoutAction
from multigpu_operator.api.placement import level_name
from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import ConditionChange, Event, condition
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.placement.placed import Placed
from multigpu_operator.policy.step import Observed, Outcome, Progress
from multigpu_operator.policy.steps.gang import scheduling

NO_DOMAIN_FITS = "NoDomainFits"
PLACEMENT_RETRIED = "PlacementRetried"
PLACED = "Placed"


def domain_choice(seen: Observed, progress: Progress) -> Outcome:
    where = seen.placement
    if where is None:
        return Outcome()
    if where.choice.never:
        return _no_domain_fits(seen, where)
    moved = _moved(seen, progress, where)
    if moved is not None:
        return moved
    status = JobStatus(placement=where.status())
    if not where.changed:
        return Outcome(status=status)
    said = "; ".join(s for s in (where.choice.waits, where.choice.note) if s)
    msg = f"pods placed in {where.summary()}" + (f": {said}" if said else "")
    return Outcome(status=status, changes=(Event("Normal", PLACED, msg),))


def _no_domain_fits(seen: Observed, where: Placed) -> Outcome:
    gang = seen.job.spec.gang
    since = seen.previous.unscheduled_since or seen.now
    waited = (seen.now - since).total_seconds()
    status = JobStatus(placement=where.status())
    why = where.choice.never
    if waited >= gang.timeout_seconds:
        msg = f"after gang.timeoutSeconds ({gang.timeout_seconds}s) {why}"
        if gang.on_timeout is not GangTimeoutAction.WAIT:
            return fail(NO_DOMAIN_FITS, msg)
        said = condition(ConditionType.SCHEDULED, False, NO_DOMAIN_FITS, f"{msg}; still waiting")
        return Outcome(
            status=status.merged(JobStatus(unscheduled_since=rfc3339(since))),
            changes=(said,),
            stop=Phase.PENDING,
        )
    if gang.on_timeout is GangTimeoutAction.WAIT:
        then = "waiting for nodes that make one fit (gang.onTimeout Wait)"
    else:
        then = (
            f"the job fails after gang.timeoutSeconds ({gang.timeout_seconds}s) unless nodes "
            "join that make one fit"
        )
    msg = f"{why}; {then}"
    changes: tuple[ConditionChange | Event, ...] = (
        condition(ConditionType.SCHEDULED, False, NO_DOMAIN_FITS, msg),
    )
    before = seen.previous.condition(ConditionType.SCHEDULED)
    if not (before and before.reason == NO_DOMAIN_FITS):
        changes = (*changes, Event("Warning", NO_DOMAIN_FITS, msg))
    return Outcome(
        status=status.merged(JobStatus(unscheduled_since=rfc3339(since))),
        changes=changes,
        wake_after=(gang.timeout_seconds - waited,),
        stop=Phase.PENDING,
    )


def _moved(seen: Observed, progress: Progress, where: Placed) -> Outcome | None:
    """The chosen domains given up, if the scheduler turned a pod of the gang away there
    and another domain not tried holds the job now; None otherwise."""
    if not where.alternatives or not where.choice.domains:
        return None
    if seen.elastic and seen.previous.created_attempt and seen.had_condition(ConditionType.RUNNING):
        return None  # a running elastic job grows in place (policy/placement/choice.grown)
    current = [
        p
        for p in seen.current(progress.attempt)
        if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]
    spec = seen.job.spec
    needed = spec.elastic.min_replicas if seen.elastic and spec.elastic else len(seen.desired.pods)
    state = scheduling(current)
    if not current or state.scheduled >= needed or not state.unschedulable:
        return None
    # The scheduler turned a pod away: the domain cannot hold the job now, whatever the
    # operator's estimate said (it sees only its own pods). With none of its pods placed
    # the gang moves at once (nothing is lost); with some placed, at the gang timeout
    # (deleting running pods takes their grace period, and the domain may free up).
    timeout = spec.gang.timeout_seconds
    since = seen.previous.unscheduled_since
    timed_out = since is not None and seen.now >= since + timedelta(seconds=timeout)
    if state.scheduled and not timed_out:
        return None
    level = level_name(where.placement.topology_key)
    others = len(where.alternatives)
    when = f"within gang.timeoutSeconds ({timeout}s)" if state.scheduled else "now"
    msg = (
        f"the gang cannot start in {where.summary()} {when}: {state.shortage(needed)}; "
        f"choosing again among {others} other {level}{'s' if others > 1 else ''} that hold "
        "it now"
    )
    # A fresh attempt (not counted as a restart) once the pods are gone, through the
    # requeue after a gang timeout (policy/steps/requeue.py), at once.
    return Outcome(
        status=JobStatus(placement=where.given_up(), requeue_at=rfc3339(seen.now)),
        changes=(
            condition(ConditionType.SCHEDULED, False, PLACEMENT_RETRIED, msg),
            Event("Normal", PLACEMENT_RETRIED, msg),
        ),
        delete_pods=tuple(name_of(p) for p in current),
        stop=Phase.PENDING,
    )

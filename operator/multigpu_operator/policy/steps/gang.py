"""Gang start under spec.gang (pure): are enough of an attempt's pods scheduled, and if
not, why not, and for how long the job waits before onTimeout applies.

Unschedulable pods are either waiting for room (the cluster is busy) or can never run on
any node of the cluster (policy/kube/fit.py). The latter is said at once (Scheduled=False,
reason NoNodeFits, and a Warning event), and at the timeout the job fails instead of
being requeued, unless onTimeout is Wait: requeueing cannot make a node bigger. It is
not failed at once, so that a node that fits may still join (a cluster autoscaler adding
a bigger node); meanwhile such a job holds no GPUs, since its pods are all alike and none
of them is placed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from multigpu_operator.api.lifecycle import GangTimeoutAction
from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import ConditionChange, Event, condition
from multigpu_operator.policy.kube.fit import never_fits
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Observed, Outcome, Progress

# The scheduler's reason while a scheduling gate (e.g. Kueue's admission gate) holds a pod.
SCHEDULING_GATED = "SchedulingGated"
# The scheduler's reason when no node fits a pod now.
UNSCHEDULABLE = "Unschedulable"
# Ours when no node of the cluster could ever fit the job's pods.
NO_NODE_FITS = "NoNodeFits"


@dataclass(frozen=True)
class Scheduling:
    scheduled: int
    # Not on a node: reported Unschedulable by the scheduler, or not yet looked at.
    unscheduled: int
    unschedulable: int
    gated: int
    # The scheduler's most common message for the unscheduled pods, e.g.
    # "0/5 nodes are available: 4 Insufficient nvidia.com/gpu, ...".
    why: str

    def shortage(self, needed: int) -> str:
        total = self.scheduled + self.unscheduled
        floor = f" (at least {needed} must be scheduled)" if needed < total else ""
        return f"{self.unscheduled} of {total} pods unscheduled{floor}: {self.why}"


def gang_start(seen: Observed, progress: Progress) -> Outcome:
    spec = seen.job.spec
    if seen.elastic and seen.previous.created_attempt and seen.had_condition(ConditionType.RUNNING):
        return Outcome()  # a running elastic job is governed by elastic.below_min
    current = [
        p
        for p in seen.current(progress.attempt)
        if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]
    needed = spec.elastic.min_replicas if seen.elastic and spec.elastic else len(seen.desired.pods)
    state = scheduling(current)
    if current and state.scheduled >= needed:
        if not seen.had_condition(ConditionType.SCHEDULED):
            return Outcome()  # only news after a wait
        msg = f"{state.scheduled} pods scheduled"
        return Outcome(changes=(condition(ConditionType.SCHEDULED, True, "PodsScheduled", msg),))
    if state.unschedulable == 0:
        # Pods the scheduler has not looked at yet, or held by a scheduling gate (queued
        # for admission): no timer runs.
        if not state.gated:
            return Outcome()
        msg = f"{state.gated} pods held by a scheduling gate (waiting for admission)"
        return Outcome(changes=(condition(ConditionType.SCHEDULED, False, SCHEDULING_GATED, msg),))
    # The job's pods are alike: the lowest-numbered one the scheduler turned away stands
    # for all (so the message does not change with the informer's order). The pod as the
    # API server holds it: admission may have added requests or tolerations.
    # (state.unschedulable > 0 counted at least one such pod.)
    stuck = min(
        (
            p
            for p in current
            if not p.get("spec", {}).get("nodeName")
            and _pod_scheduled(p).get("reason") == UNSCHEDULABLE
        ),
        key=lambda p: (len(p["metadata"]["name"]), p["metadata"]["name"]),
    )
    return _unschedulable(seen, progress, state.shortage(needed), stuck)


def _unschedulable(
    seen: Observed, progress: Progress, shortage: str, stuck: Mapping[str, Any]
) -> Outcome:
    """The gang timer runs from status.unscheduledSince; then onTimeout applies."""
    gang = seen.job.spec.gang
    since = seen.previous.unscheduled_since or seen.now
    waited = (seen.now - since).total_seconds()
    never = never_fits(stuck, seen.nodes)
    if never is not None:
        shortage = f"{never.message()}; {shortage}"
    if waited < gang.timeout_seconds:
        changes: tuple[ConditionChange | Event, ...]
        if never is None:
            changes = (condition(ConditionType.SCHEDULED, False, UNSCHEDULABLE, shortage),)
        else:
            changes = _never_fits(seen, shortage, gang.timeout_seconds)
        return Outcome(
            status=JobStatus(unscheduled_since=rfc3339(since)),
            changes=changes,
            wake_after=(gang.timeout_seconds - waited,),
        )
    msg = f"after gang.timeoutSeconds ({gang.timeout_seconds}s) {shortage}"
    if never is not None and gang.on_timeout is not GangTimeoutAction.WAIT:
        return fail(NO_NODE_FITS, msg)
    if gang.on_timeout is GangTimeoutAction.FAIL:
        return fail("GangTimeout", msg)
    if gang.on_timeout is GangTimeoutAction.WAIT:
        still = f"{msg}; still waiting"
        reason = "GangTimeout" if never is None else NO_NODE_FITS
        return Outcome(
            status=JobStatus(unscheduled_since=rfc3339(since)),
            changes=(condition(ConditionType.SCHEDULED, False, reason, still),),
        )
    at = rfc3339(seen.now + timedelta(seconds=gang.requeue_after_seconds))
    released = f"{msg}; released its pods, retrying at {at}"
    return Outcome(
        status=JobStatus(requeue_at=at),
        changes=(condition(ConditionType.SCHEDULED, False, "GangTimeout", released),),
        delete_pods=tuple(name_of(p) for p in seen.current(progress.attempt)),
        wake_after=(gang.requeue_after_seconds,),
        stop=Phase.PENDING,
    )


def _never_fits(seen: Observed, why: str, timeout: int) -> tuple[ConditionChange | Event, ...]:
    """Said at once, and posted as a Warning when first seen."""
    if seen.job.spec.gang.on_timeout is GangTimeoutAction.WAIT:
        then = "waiting for a node that fits (gang.onTimeout Wait)"
    else:
        then = f"the job fails after gang.timeoutSeconds ({timeout}s) unless a node that fits joins"
    msg = f"{why}; {then}"
    said = condition(ConditionType.SCHEDULED, False, NO_NODE_FITS, msg)
    before = seen.previous.condition(ConditionType.SCHEDULED)
    if before and before.reason == NO_NODE_FITS:
        return (said,)
    return (said, Event("Warning", NO_NODE_FITS, msg))


def scheduling(pods: Sequence[Mapping[str, Any]]) -> Scheduling:
    """Live pods only (not being deleted, not finished)."""
    scheduled = unscheduled = unschedulable = gated = 0
    messages: Counter[str] = Counter()
    for pod in pods:
        if pod.get("spec", {}).get("nodeName"):
            scheduled += 1
            continue
        cond = _pod_scheduled(pod)
        if cond.get("reason") == SCHEDULING_GATED:
            gated += 1
            continue
        unscheduled += 1
        if cond.get("reason") == UNSCHEDULABLE:
            unschedulable += 1
            messages[cond.get("message") or UNSCHEDULABLE] += 1
    why = messages.most_common(1)[0][0] if messages else "waiting for the scheduler"
    return Scheduling(scheduled, unscheduled, unschedulable, gated, why.strip())


def _pod_scheduled(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for cond in pod.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return {}

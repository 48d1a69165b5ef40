"""Elastic size (pure): spec.replicas within [minReplicas, maxReplicas] decides the pods;
a running job stays Running while at least minReplicas pods run, and below that for
elastic.belowMinTimeoutSeconds onBelowMin applies."""

from __future__ import annotations

from multigpu_operator.api.lifecycle import BelowMinAction
from multigpu_operator.api.pod_labels import replica_index
from multigpu_operator.api.status import ConditionType, JobStatus
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import Event, cleared
from multigpu_operator.policy.kube.pods import count_pods, name_of
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Observed, Outcome, Progress


def elastic_size(seen: Observed, progress: Progress) -> Outcome:
    if not seen.elastic:
        return Outcome()
    below = below_min(seen, progress)
    if below.stop is not None:
        return below
    return below.then(scale(seen))


def below_min(seen: Observed, progress: Progress) -> Outcome:
    """Once the job has run: fewer than minReplicas running pods start the timer at
    status.belowMinSince."""
    policy = seen.job.spec.elastic
    if policy is None or not seen.had_condition(ConditionType.RUNNING):
        return Outcome()
    running = count_pods(seen.current(progress.attempt)).running
    if running >= policy.min_replicas:
        return Outcome()
    since = seen.previous.below_min_since or seen.now
    waited = (seen.now - since).total_seconds()
    timeout = policy.below_min_timeout_seconds
    msg = f"{running} of at least elastic.minReplicas ({policy.min_replicas}) pods running"
    wake: tuple[float, ...] = ()
    if waited < timeout:
        wake = (timeout - waited,)
    elif policy.on_below_min is BelowMinAction.FAIL:
        return fail("BelowMinReplicas", f"{msg} for {timeout}s")
    else:
        msg += "; waiting for capacity"
    return Outcome(
        status=JobStatus(below_min_since=rfc3339(since)),
        changes=(cleared(ConditionType.RUNNING, "BelowMinReplicas", msg),),
        wake_after=wake,
    )


def scale(seen: Observed) -> Outcome:
    """Pods above spec.replicas go, highest index first; missing ones are created."""
    target = len(seen.desired.pods)
    extra = sorted(
        (p for p in seen.live if replica_index(p) >= target), key=replica_index, reverse=True
    )
    before = seen.previous.target_replicas
    scaled = before is not None and before != target
    return Outcome(
        status=JobStatus(target_replicas=target),
        delete_pods=tuple(name_of(p) for p in extra),
        changes=(Event("Normal", "Scaled", f"scaled from {before} to {target} pods"),)
        if scaled
        else (),
    )

"""Failures and restarts under spec.runPolicy (pure).

DistributedDataParallel, DataParallel, ModelParallel: one failed (or lost) replica
breaks the collective, so the attempt is over: the next attempt's number is written
first, then the old attempt's pods are deleted, and their names are reused once they
are gone. Elastic: only the failed pod is replaced; torchrun re-forms the group around
it. What each failure does, and which budget it is counted against, is the verdict of
the failure-policy rules (policy/failures/rules.py); a node where an infrastructure fault
ended a pod is kept off from then on (policy/failures/avoidance.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from multigpu_operator.api.failure_policy import FailureAction
from multigpu_operator.api.pod_labels import attempt_of, replica_index
from multigpu_operator.api.status import ConditionType, JobStatus
from multigpu_operator.policy.failures.avoidance import avoided_after
from multigpu_operator.policy.failures.end_attempt import end_attempt
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.failures.failed_pods import Failure, failures, lost_pod
from multigpu_operator.policy.failures.rules import judge
from multigpu_operator.policy.kube.conditions import condition
from multigpu_operator.policy.kube.pods import being_deleted, name_of
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Observed, Outcome, Progress

# Seconds until the pass that replaces a pod judged from its last state (unjudged_gone).
GONE_REPLACED_AFTER = 1.0


def failures_and_restarts(seen: Observed, progress: Progress) -> Outcome:
    old = tuple(name_of(p) for p in seen.older(progress.attempt))
    replace_failed = elastic_failures if seen.elastic else attempt_failure
    return Outcome(delete_pods=old).then(replace_failed(seen, progress))


def attempt_failure(seen: Observed, progress: Progress) -> Outcome:
    """The first failed replica of the attempt (or one that disappeared after the attempt
    had all its pods) ends it: a new attempt, or the job fails."""
    found = failures(seen.current(progress.attempt), seen.nodes)
    if not found and seen.previous.created_attempt == progress.attempt:
        found = _lost(seen, progress)[:1]
    if not found:
        return Outcome()
    return end_attempt(seen, progress, found)


def _lost(seen: Observed, progress: Progress) -> list[Failure]:
    """The desired pods of the attempt that are gone or being deleted, with what the
    pod being deleted still says about why."""
    present = {name_of(p) for p in seen.current(progress.attempt)}
    leaving = {
        name_of(p): p
        for p in (*seen.gone, *seen.pods)  # one being deleted is newer than one gone
        if name_of(p) not in present and attempt_of(p) == progress.attempt
    }
    return [
        lost_pod(name_of(p), i, leaving.get(name_of(p)), seen.nodes)
        for i, p in enumerate(seen.desired.pods)
        if name_of(p) not in present
    ]


def elastic_failures(seen: Observed, progress: Progress) -> Outcome:
    """Each failed pod is replaced alone and judged once (status.countedFailures holds
    the failed pods already judged while they are still seen); so is a pod Kubernetes
    is deleting for a fault (its node lost, an eviction), replaced once it is gone."""
    failed = failures(seen.current(progress.attempt), seen.nodes)
    found = failed + _disrupted_leaving(seen, progress)
    judged = set(seen.previous.counted_failures or ())
    policy = seen.job.spec.run_policy
    avoided = list(seen.previous.avoided_nodes or ())
    decided = Outcome()
    for failure in found:
        if failure.uid and failure.uid in judged:
            continue
        verdict = judge(policy, failure, progress)
        last = JobStatus(last_failure=failure.as_status(progress.attempt, verdict.rule))
        if verdict.fails:
            outcome = Outcome(status=last).then(fail(verdict.fail_reason, verdict.fail_message))
            return decided.then(outcome)
        progress = verdict.progress
        judged.add(failure.uid)
        avoided = avoided_after(avoided, [failure])
        if verdict.action is FailureAction.IGNORE:
            decided = decided.then(Outcome(status=last))
            continue
        progress = replace(progress, restarted=progress.restarted + 1)
        msg = f"replacing {failure.message()} ({verdict.counted_as})"
        reason = str(failure.fault) if failure.fault else "PodFailed"
        decided = decided.then(
            Outcome(
                status=last.merged(verdict.progress.restart_counters()),
                changes=(
                    condition(ConditionType.RESTARTING, True, reason, msg, always_event=True),
                ),
                progress=progress,
            )
        )
    if not found:
        return decided
    status = JobStatus(counted_failures=sorted(f.uid for f in found if f.uid in judged))
    if avoided:
        status = status.merged(JobStatus(avoided_nodes=avoided))
    # A pod judged from its last state is gone already: no event will come to replace
    # it, so the job looks again in a second (unjudged_gone).
    newly = judged - set(seen.previous.counted_failures or ())
    gone = {p["metadata"].get("uid") for p in seen.gone} & newly
    wake = (GONE_REPLACED_AFTER,) if gone else ()
    outcome = Outcome(status=status, delete_pods=tuple(f.pod for f in failed), wake_after=wake)
    return decided.then(outcome)


def _disrupted_leaving(seen: Observed, progress: Progress) -> list[Failure]:
    """Members being deleted by Kubernetes for a fault (DisruptionTarget): the taint
    manager's eviction from a lost node, PodGC, a preemption, a drain; and those already
    deleted so (seen.gone), which no pass may have seen leaving."""
    found = []
    leaving = [p for p in seen.pods if being_deleted(p)]
    uids = {p["metadata"].get("uid") for p in leaving}
    gone = [p for p in seen.gone if p["metadata"].get("uid") not in uids]
    for pod in (*leaving, *gone):
        if attempt_of(pod) > progress.attempt:
            continue
        failure = lost_pod(name_of(pod), replica_index(pod), pod, seen.nodes)
        if failure.fault and "DisruptionTarget" in failure.conditions:
            found.append(replace(failure, uid=str(pod["metadata"].get("uid", ""))))
    return found


def unjudged_gone(
    elastic: bool,
    pods: Sequence[Mapping[str, Any]],
    gone: Sequence[Mapping[str, Any]],
    previous: JobStatus,
    now: datetime,
) -> tuple[Mapping[str, Any], ...]:
    """An elastic job's pods deleted for a fault that no pass has judged yet, each as a
    pod being deleted: the pass judges it (_disrupted_leaving) and its replacement comes
    in the next, kept off the node just added to status.avoidedNodes, as for a pod seen
    leaving. A restart of a whole attempt needs none of this: its pods come later."""
    if not elastic:
        return ()
    judged = set(previous.counted_failures or ())
    names = {name_of(p) for p in pods}
    return tuple(
        {**p, "metadata": {**p["metadata"], "deletionTimestamp": rfc3339(now)}}
        for p in gone
        if p["metadata"].get("uid") not in judged and name_of(p) not in names
    )

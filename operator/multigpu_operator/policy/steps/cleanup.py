"""A finished job: it stays finished, the clean-pod policy deletes what it names, and
ttlSecondsAfterFinished deletes the job itself (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from multigpu_operator.api.lifecycle import CleanPodPolicy
from multigpu_operator.api.status import TERMINAL, JobStatus
from multigpu_operator.policy.kube.pods import being_deleted, name_of
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Observed, Outcome, Pod, Progress

_FINISHED = ("Succeeded", "Failed")


def stay_finished(seen: Observed, progress: Progress) -> Outcome:
    """Succeeded and Failed are final: the pass ends in the phase the job had."""
    if seen.previous_phase in TERMINAL:
        return Outcome(stop=seen.previous_phase)
    return Outcome()


def after_finish(seen: Observed) -> Outcome:
    """For a job that is finished (or finishes in this pass): when it finished, the pods
    to clean up, and when (or whether now) the job is deleted."""
    policy = seen.job.spec.run_policy
    completion = seen.previous.completion_time or seen.now
    finished = Outcome(
        status=JobStatus(completion_time=rfc3339(completion)),
        delete_pods=tuple(pods_to_clean(seen.live, policy.clean_pod_policy)),
    )
    left = ttl_left(completion, policy.ttl_seconds_after_finished, seen.now)
    if left is None:
        return finished
    if left <= 0:
        return finished.then(Outcome(delete_job=True))
    return finished.then(Outcome(wake_after=(left,)))


def pods_to_clean(pods: Sequence[Pod], policy: CleanPodPolicy) -> list[str]:
    """Names of the live pods `policy` deletes once the job has finished."""
    live = [p for p in pods if not being_deleted(p)]
    if policy is CleanPodPolicy.NONE:
        return []
    if policy is CleanPodPolicy.RUNNING:
        live = [p for p in live if p.get("status", {}).get("phase") not in _FINISHED]
    return sorted(name_of(p) for p in live)


def ttl_left(completion: datetime, ttl_seconds: int | None, now: datetime) -> float | None:
    """Seconds until a finished job is deleted (0 or less: now); None if it is kept.

    In seconds, not datetimes: completion + a TTL the schema allows (an int64) can be past
    datetime.max (year 9999), an OverflowError that would leave the job "Running".
    """
    if ttl_seconds is None:
        return None
    return ttl_seconds - (now - completion).total_seconds()

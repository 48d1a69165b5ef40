"""Failing a job, the one way: every step that gives up, and the controller when it
cannot plan a job's spec or create its pods, fail a job with these condition changes
(pure)."""

from __future__ import annotations

from datetime import datetime

from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.kube.conditions import Conditions, cleared, condition
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Outcome, StatusUpdate


def fail(reason: str, message: str) -> Outcome:
    """The pass ends here with the job Failed."""
    return Outcome(
        changes=(
            cleared(ConditionType.RUNNING, reason, message),
            cleared(ConditionType.RESTARTING, reason, message),
            condition(ConditionType.FAILED, True, reason, message),
        ),
        stop=Phase.FAILED,
    )


def invalid_job(
    previous: JobStatus, generation: int, reason: str, message: str, now: datetime
) -> StatusUpdate:
    """The job cannot run as written (its spec cannot be planned, or the API server
    refused its pods): it fails, and nothing else of its status changes."""
    if previous.phase is Phase.FAILED:
        return StatusUpdate(previous, (), None)
    conditions = Conditions(previous, generation, now)
    conditions.apply(fail(reason, message).changes)
    failed = JobStatus(
        phase=Phase.FAILED,
        reason=reason,
        conditions=conditions.as_list(),
        observed_generation=generation,
        completion_time=rfc3339(now),
    )
    return StatusUpdate(previous.merged(failed), tuple(conditions.events), Phase.FAILED)

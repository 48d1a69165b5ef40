"""What the API server refused in the last pass, turned into the job's status (pure).

The actuator records a refusal of the job's pods, pod template (a dry run), Service or
status; the next pass reads it here: a full quota or a ServiceAccount not there yet is
waited for, with the Created condition saying so; anything else fails the job, naming
the field to fix (no retry makes the server accept the same object).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from multigpu_operator.api.status import ConditionType, JobStatus
from multigpu_operator.policy.failures.fail import invalid_job
from multigpu_operator.policy.kube.conditions import Conditions, Event, condition
from multigpu_operator.policy.step import Decision, StatusUpdate

# What was refused: the pods, the first pod sent as a dry run, the headless Service,
# the job's own status.
Refused = Literal["Pod", "PodTemplate", "Service", "Status"]


@dataclass(frozen=True)
class Refusal:
    """One refusal by the API server, kept for the next pass of the job `uid`."""

    uid: str
    refused: Refused
    message: str  # the server's own words
    invalid: bool = False  # 422 Invalid; else an admission 403
    # The Created condition's reason while what may pass is waited for (a full
    # ResourceQuota, a missing ServiceAccount); empty: the job fails.
    waits: str = ""
    field: str = ""  # the job's field an admission refusal is about
    # The status of the refused pass, where it was not written before the refused child
    # (a template dry run, a job's first pods): the next pass starts from it.
    unwritten: JobStatus | None = None


def refusal_message(refusal: Refusal) -> str:
    """What the job's condition says about a refused child: the field to fix and the
    server's own message."""
    if refusal.refused == "Service":
        return f"the job's headless Service: {refusal.message}"
    if refusal.invalid:
        return refusal.message  # validation names the pod's own field
    return f"{refusal.field}: {refusal.message}"


def after_refusal(stored: JobStatus, generation: int, refusal: Refusal, now: datetime) -> Decision:
    """The pass that accounts for `refusal`, before any step runs: only its status is
    written."""
    if refusal.refused == "Status":
        # Numbers the schema should have bounded (a world size past int32) made a status
        # the server refused: fail from the status stored, once, instead of retrying.
        message = f"the job's status was refused: {refusal.message}"
        update = invalid_job(stored, generation, "InvalidSpec", message, now)
        # Pods created before that write go by the clean-pod policy.
        return _only_status(update, requeue_after=0)
    base = refusal.unwritten or stored
    message = refusal_message(refusal)
    if refusal.waits:
        update = not_created(base, generation, refusal.waits, message, now)
        return replace(_only_status(update), waiting=message)
    if refusal.refused != "Service":
        reason = "InvalidPodTemplate" if refusal.invalid else "PodForbidden"
        return _only_status(invalid_job(base, generation, reason, message, now))
    failed = invalid_job(base, generation, "ServiceRefused", message, now)
    # The Created condition must not keep claiming a Service that does not exist.
    created = not_created(failed.status, generation, "ServiceRefused", message, now)
    return _only_status(StatusUpdate(created.status, failed.events, failed.entered))


def not_created(
    status: JobStatus, generation: int, reason: str, message: str, now: datetime
) -> StatusUpdate:
    """`status` with the Created condition False for `reason` (the server refused a
    child), and a Warning event the first time, not on every retry."""
    again = any(
        c.type == ConditionType.CREATED and c.reason == reason for c in status.conditions or ()
    )
    conditions = Conditions(status, generation, now)
    conditions.apply([condition(ConditionType.CREATED, False, reason, message)])
    events = () if again else (Event("Warning", reason, message),)
    return StatusUpdate(status.merged(JobStatus(conditions=conditions.as_list())), events, None)


def _only_status(update: StatusUpdate, requeue_after: float | None = None) -> Decision:
    return Decision(
        update.status,
        update.events,
        update.entered,
        requeue_after=requeue_after,
        only_status=True,
    )

"""spec.runPolicy.stall: the stall watchdog. A job whose training step stands still
while every pod runs is stalled (a hung collective, a dead data loader); the operator
names the ranks that stopped and acts (policy/steps/stall.py)."""

from __future__ import annotations

import enum

from pydantic import Field

from multigpu_operator.api.base import ApiModel, Int32
from multigpu_operator.api.limits import MAX_WAIT_SECONDS

# Automatic deadline: this many median step times, and never less than the floor.
AUTO_STEP_TIMES = 10
AUTO_FLOOR_SECONDS = 300


class StallAction(enum.StrEnum):
    RESTART = "Restart"  # a failure with fault Stalled, through the failure-policy rules
    FAIL = "Fail"  # the job fails with reason Stalled
    NOTIFY = "Notify"  # condition Stalled and a Warning Event, nothing more


class StallPolicy(ApiModel):
    """When a job counts as stalled, and what happens then. Without it (or without
    deadlineSeconds) the watchdog is automatic: on once the job reports progress."""

    deadline_seconds: Int32 | None = Field(
        None,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=(
            "Seconds the training step may stand still while every pod of the attempt "
            "runs and no checkpoint is being written; then the job is stalled. Unset: "
            f"automatic, on once the job reports progress, with a deadline of "
            f"{AUTO_STEP_TIMES} median step times and at least {AUTO_FLOOR_SECONDS}. "
            "0: off. A set value applies even to a job that reports nothing, counted from "
            "when all its pods run."
        ),
    )
    action: StallAction = Field(
        StallAction.RESTART,
        description=(
            "Restart: the stall is a failure with fault Stalled, decided by the "
            "failurePolicy rules (onFaults: [Stalled]), else a new attempt counted "
            "against backoffLimit (Elastic: the pods of the stalled ranks are replaced); "
            "restartPolicy Never fails the job. Fail: the job fails with reason Stalled. "
            "Notify: condition Stalled and a Warning Event only; Stalled turns False when "
            "the step moves again."
        ),
    )

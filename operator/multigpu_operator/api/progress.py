"""status.progress: how far the job's training has got, as its processes last reported
it (policy/steps/progress.py fills it from policy/training.py's report).

Small on purpose: it is refreshed while the job runs (at most every
PROGRESS_READ_SECONDS per job, under the operator's budget of status writes), and
`kubectl get mgj` prints `summary` and `eta`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from multigpu_operator.api.base import Int32, Int64, StatusModel

Steps = Annotated[Int64, Field(ge=0)]
Rate = Annotated[float, Field(ge=0)]


class JobProgress(StatusModel):
    """The training progress of the current attempt, as its processes last reported it."""

    step: Steps = Field(description="Optimizer steps done, resumed ones included.")
    total_steps: Steps | None = Field(
        None, description="Steps the training will take; absent when not known."
    )
    epoch: Steps | None = Field(None, description="The epoch, from 0.")
    samples_per_second: Rate | None = Field(None, description="Training samples per second.")
    steps_per_second: Rate | None = Field(
        None, description="Steps per second (1 / the median time of recent steps)."
    )
    percent: Int32 | None = Field(
        None, ge=0, le=100, description="Steps done out of totalSteps, rounded down."
    )
    eta: str | None = Field(
        None,
        max_length=16,
        description='Time left at the current rate, e.g. "1h12m"; absent when unknown.',
    )
    estimated_finish_time: datetime | None = Field(
        None, description="When the training should finish at the current rate."
    )
    resumed_step: Steps | None = Field(
        None, description="The step the current attempt resumed at from a checkpoint."
    )
    last_progress_time: datetime | None = Field(None, description="When the step last moved.")
    observed_time: datetime | None = Field(
        None, description="When the operator read this from the training processes."
    )
    summary: str | None = Field(
        None,
        max_length=32,
        description='For printing: "42%" when totalSteps is known, else "step 1200".',
    )

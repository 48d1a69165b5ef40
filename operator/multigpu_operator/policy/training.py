"""What a job's training processes say about themselves (pure shapes): the progress the
operator reads from their metrics endpoints (controller/progress_board.py) and hands to
a pass in Observed.training.

The contract with the processes is a handful of Prometheus gauges on each process's
metrics port (MGJ_TRAINER_METRICS_PORT + LOCAL_RANK), which our trainer images serve
by default and a user's script serves with multigpu_train.progress; docs/training.md
lists them. The operator reads replica 0's first process every PROGRESS_READ_SECONDS,
and every process of the job once the step has stood still for a while, so that a stall
can name the ranks that stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# The gauges read (metric names as served; each has the labels job and rank).
STEP = "mgj_trainer_progress_step"  # optimizer steps done by the job, resumed ones included
TOTAL_STEPS = "mgj_trainer_progress_total_steps"  # 0 when not known
EPOCH = "mgj_trainer_epoch"  # 0-based
SAMPLES_PER_SECOND = "mgj_trainer_samples_per_second"
STEP_SECONDS = "mgj_trainer_progress_step_seconds"  # median wall time of recent steps
CHECKPOINTING = "mgj_trainer_progress_checkpointing"  # 1 while a checkpoint is written
RESUMED_STEP = "mgj_trainer_progress_resumed_step"  # the step this run resumed at; 0: none
GAUGES = (STEP, TOTAL_STEPS, EPOCH, SAMPLES_PER_SECOND, STEP_SECONDS, CHECKPOINTING, RESUMED_STEP)

# How often replica 0 is read, and the least time between two status writes of one job
# for progress alone.
PROGRESS_READ_SECONDS = 15.0


@dataclass(frozen=True)
class ProcessReport:
    """One process's gauges as read once; `answered` False when its endpoint did not
    answer (a frozen or dead process), and then the numbers are None."""

    pod: str
    replica: int
    local_rank: int
    rank: int  # global rank: replica * processes per pod + local_rank
    node: str
    answered: bool
    step: int | None = None
    checkpointing: bool = False


@dataclass(frozen=True)
class TrainingReport:
    """The latest progress of one attempt of a job, as the operator last read it."""

    attempt: int  # the attempt whose pods answered (the pods' attempt label)
    step: int
    read_at: datetime  # when replica 0 last answered
    # When the step last moved or a checkpoint was last being written: the start of a
    # stall, if there is one.
    last_change: datetime
    total_steps: int | None = None
    epoch: int | None = None
    samples_per_second: float | None = None
    step_seconds: float | None = None  # median of recent steps
    resumed_step: int | None = None
    checkpointing: bool = False
    # Every process, read when the step has stood still for a while (else empty).
    processes: tuple[ProcessReport, ...] = ()
    # Whether the status may be written for this report now (the operator's budget of
    # progress writes, PROGRESS_READ_SECONDS per job at the least): a pass writes
    # status.progress only when this is True or when the job leaves Running.
    publish: bool = False

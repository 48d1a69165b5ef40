"""What a job's training processes say about themselves (pure shapes): the progress the
operator reads from their metrics endpoints (controller/progress_board.py) and hands to
a pass in Observed.training.

The contract with the processes is a handful of Prometheus gauges on each process's
metrics port (MGJ_TRAINER_METRICS_PORT + LOCAL_RANK), which our trainer images serve
by default and a user's script serves with multigpu_train.progress; docs/training.md
lists them. The operator reads replica 0's first process every PROGRESS_READ_SECONDS,
and every process of the job once the step has stood still for a while, so that a stall
can name the ranks that stopped.

A job may end before the first read. The processes of LOCAL_RANK 0 then leave their last
progress in their container's termination message ("Progress: step=120 total_steps=120
epoch=9", multigpu_train/progress.py), which the kubelet keeps in the pod's status:
`final_progress` reads it from the pods a pass is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from multigpu_operator.api.pod_labels import replica_index

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
    # When the step last moved or a checkpoint began or ended: the start of a stall, if
    # there is one.
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


# A finished process's termination message, as multigpu_train/progress.py writes it.
FINAL_PREFIX = "Progress: "
_FINAL = re.compile(
    r"^Progress: step=(?P<step>\d+)(?: total_steps=(?P<total>\d+))?(?: epoch=(?P<epoch>\d+))?$"
)
TRAINER_CONTAINER = "trainer"


@dataclass(frozen=True)
class FinalProgress:
    """The progress a training process left in its container's termination message."""

    step: int
    total_steps: int | None = None
    epoch: int | None = None


def parse_final(message: str) -> FinalProgress | None:
    """A termination message's progress; None for any other message."""
    found = _FINAL.match(message.strip())
    if found is None:
        return None
    total, epoch = found["total"], found["epoch"]
    return FinalProgress(
        int(found["step"]),
        int(total) if total else None,
        int(epoch) if epoch is not None else None,
    )


def final_progress(pods: Iterable[Mapping[str, Any]]) -> FinalProgress | None:
    """The last progress the pods' training containers (the one named "trainer", else the
    first) left on exit: replica 0's, else the furthest; None when none left any."""
    found: list[tuple[int, FinalProgress]] = []
    for pod in pods:
        said = parse_final(_termination_message(pod))
        if said is not None:
            found.append((replica_index(pod), said))
    if not found:
        return None
    first = [said for replica, said in found if replica == 0]
    return first[0] if first else max((said for _, said in found), key=lambda f: f.step)


def _termination_message(pod: Mapping[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    named = [cs for cs in statuses if cs.get("name") == TRAINER_CONTAINER]
    for cs in named or statuses[:1]:
        terminated = (cs.get("state") or {}).get("terminated") or {}
        return str(terminated.get("message") or "")
    return ""

"""Which of a running job's processes the operator reads, what their readings make of the
job's report, and when its status may show it (pure: no I/O, no clock; every time comes
in as `now`). controller/progress_board.py does the reads and keeps what they gave.

Every PROGRESS_READ_SECONDS the leader reads replica 0's first process of each running
job (`leader`). Once the job's step has stood still for a while (`reads_everyone`), every
process of the job is read too (`everyone`), so that a stall names the ranks that
stopped. Replica 0's reading is folded into the job's TrainingReport (`folded`), the
others' readings become its `processes` (`process_reports`).

Writing progress into the status costs an API request, so it has a budget: a job is
given a turn (its next pass may write status.progress) at most every
PROGRESS_READ_SECONDS, and all jobs together at most `writes_per_second`, the ones shown
longest ago first (`turn_budget`, `due`). Up to writes_per_second x PROGRESS_READ_SECONDS
running jobs (30 by default) each status is fresh within that period; beyond, every
job's turn comes round more slowly. A turn waits for the job's next pass, which takes it
(`JobReading.taken`). Stalls do not wait for a turn: a pass reads the latest reading
whatever was published.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from multigpu_operator.api.pod_labels import attempt_of, replica_index
from multigpu_operator.api.spec import Mode
from multigpu_operator.api.status import Phase
from multigpu_operator.api.template import trainer_index
from multigpu_operator.plan.env import metrics_port
from multigpu_operator.policy import training as gauges
from multigpu_operator.policy.kube.pods import being_deleted
from multigpu_operator.policy.training import (
    PROGRESS_READ_SECONDS,
    ProcessReport,
    TrainingReport,
)

JobKey = tuple[str, str]  # (namespace, name), as the caches key jobs
Pod = Mapping[str, Any]

# Target choice -------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """What a job's plan says of its processes."""

    port: int  # of local rank 0; local rank r serves port + r; 0: the job serves no metrics
    processes: int  # per pod
    elastic: bool  # an Elastic job's members are the pods of every attempt


@dataclass(frozen=True)
class Target:
    """Where a job's processes serve their gauges."""

    attempt: int
    port: int  # of local rank 0; local rank r serves port + r
    processes: int  # per pod
    pods: tuple[Pod, ...]  # running pods of the attempt, by replica index


@dataclass(frozen=True)
class Place:
    """One process's metrics endpoint."""

    pod: Pod
    local_rank: int
    port: int

    @property
    def ip(self) -> str:
        return str(self.pod["status"]["podIP"])


def running_jobs(jobs: Mapping[JobKey, Mapping[str, Any]]) -> list[JobKey]:
    """The jobs whose processes are read: those Running."""
    return [
        key
        for key, body in jobs.items()
        if (body.get("status") or {}).get("phase") == Phase.RUNNING
    ]


def served(desired_pod: Pod, mode: Mode) -> Served:
    """What one of the job's desired pods says of its processes: the trainer container's
    metrics port, and its processes per pod."""
    containers: Sequence[Mapping[str, Any]] = desired_pod["spec"]["containers"]
    container = containers[trainer_index(containers)]
    return Served(
        metrics_port(container.get("env") or []),
        processes_per_pod(container),
        mode is Mode.ELASTIC,
    )


def processes_per_pod(container: Mapping[str, Any]) -> int:
    """Processes per pod: torchrun's --nproc-per-node as the planner set it, else one."""
    for var in container.get("env") or []:
        if var.get("name") == "PET_NPROC_PER_NODE" and str(var.get("value", "")).isdigit():
            return int(var["value"])
    return 1


def target(served: Served, job: Mapping[str, Any], pods: Iterable[Pod]) -> Target | None:
    """Where job `job`'s processes are read, among its pods `pods`: the running pods of its
    current attempt (of every attempt up to it, for an Elastic job) that have an IP, by
    replica index; None when the job serves no metrics or no such pod runs."""
    if not served.port:
        return None
    attempt = int((job.get("status") or {}).get("attempt", 1))
    members = sorted(
        (
            p
            for p in pods
            if (attempt_of(p) <= attempt if served.elastic else attempt_of(p) == attempt)
            and not being_deleted(p)
            and (p.get("status") or {}).get("phase") == "Running"
            and (p.get("status") or {}).get("podIP")
        ),
        key=replica_index,
    )
    if not members:
        return None
    return Target(attempt, served.port, served.processes, tuple(members))


def leader(target: Target) -> Place | None:
    """Replica 0's first process, read every round; None while replica 0 does not run
    (yet): the step is its to say."""
    first = target.pods[0]
    if replica_index(first) != 0:
        return None
    return Place(first, 0, target.port)


def everyone(target: Target) -> tuple[Place, ...]:
    """Every process of the job, by global rank."""
    return tuple(
        Place(pod, local, target.port + local)
        for pod in target.pods
        for local in range(target.processes)
    )


def read_everyone_after(report: TrainingReport) -> float:
    """How long the step stands still before every process is read: one reading period
    (so the names are there well before a stall deadline passes), or two steps of a job
    whose steps are slower than that."""
    return max(PROGRESS_READ_SECONDS, 2 * (report.step_seconds or 0.0))


def reads_everyone(report: TrainingReport, now: datetime) -> bool:
    """Whether every process is read this round: the step has stood still long enough."""
    return (now - report.last_change).total_seconds() >= read_everyone_after(report)


# Readings into a report --------------------------------------------------------


def folded(
    before: TrainingReport | None,
    attempt: int,
    read: Mapping[str, float] | None,
    now: datetime,
) -> TrainingReport | None:
    """The job's report once replica 0's reading `read` (None: no answer) is in, read at
    `now`; `before` is the report so far of this attempt. A reading without a step keeps
    the report so far; None while nothing has been reported (a job that reports nothing
    has no progress)."""
    if read is None or gauges.STEP not in read:
        return before
    step = int(read[gauges.STEP])
    checkpointing = read.get(gauges.CHECKPOINTING, 0.0) >= 1
    # A checkpoint begun or ended is a change; one in progress is not: a checkpoint that
    # outlasts a read has every process read, so that a rank missing from it is named
    # (policy/steps/stall.py).
    moved = before is None or step != before.step or checkpointing != before.checkpointing
    total = int(read.get(gauges.TOTAL_STEPS, 0))
    epoch = read.get(gauges.EPOCH)
    resumed = int(read.get(gauges.RESUMED_STEP, 0))
    return TrainingReport(
        attempt=attempt,
        step=step,
        read_at=now,
        last_change=now if moved or before is None else before.last_change,
        total_steps=total or None,
        epoch=None if epoch is None else int(epoch),
        samples_per_second=read.get(gauges.SAMPLES_PER_SECOND),
        step_seconds=read.get(gauges.STEP_SECONDS) or None,
        resumed_step=resumed or None,
        checkpointing=checkpointing,
    )


def process_report(place: Place, processes: int, read: Mapping[str, float] | None) -> ProcessReport:
    """One process's reading (None: it did not answer)."""
    replica = replica_index(place.pod)
    answered = read is not None and gauges.STEP in read
    return ProcessReport(
        pod=place.pod["metadata"]["name"],
        replica=replica,
        local_rank=place.local_rank,
        rank=replica * processes + place.local_rank,
        node=(place.pod.get("spec") or {}).get("nodeName", ""),
        answered=answered,
        step=int(read[gauges.STEP]) if read is not None and answered else None,
        checkpointing=bool(read and read.get(gauges.CHECKPOINTING, 0.0) >= 1),
    )


def process_reports(
    places: Sequence[Place], processes: int, reads: Sequence[Mapping[str, float] | None]
) -> tuple[ProcessReport, ...]:
    """The readings of `places` (everyone()), in the same order."""
    return tuple(
        process_report(place, processes, read) for place, read in zip(places, reads, strict=True)
    )


# The write budget -----------------------------------------------------------------


@dataclass(frozen=True)
class JobReading:
    """What is held of one job: its latest report (`publish` False) and its turns."""

    report: TrainingReport
    turn: bool = False  # a turn given and not yet taken by a pass
    shown_step: int | None = None  # the step of the last turn
    shown_at: datetime | None = None  # when the last turn was given

    def for_pass(self) -> TrainingReport:
        """The report as a pass reads it: `publish` while a turn waits for the pass."""
        return replace(self.report, publish=self.turn)

    def recorded(self, report: TrainingReport) -> JobReading:
        """With a newer report of the same attempt; the turns stay as they were."""
        return replace(self, report=replace(report, publish=False))

    def given_turn(self, now: datetime) -> JobReading:
        return replace(self, turn=True, shown_step=self.report.step, shown_at=now)

    def taken(self) -> JobReading:
        return replace(self, turn=False)


def current(reading: JobReading | None, attempt: int) -> JobReading | None:
    """What is held of the job, unless it is of another attempt: a new attempt starts its
    own count (and its own turns)."""
    if reading is None or reading.report.attempt != attempt:
        return None
    return reading


def turn_budget(writes_per_second: float) -> int:
    """Turns given per round, over all jobs (at least one)."""
    return max(1, round(writes_per_second * PROGRESS_READ_SECONDS))


def due(readings: Mapping[JobKey, JobReading], now: datetime, budget: int) -> list[JobKey]:
    """This round's turns, at most `budget`: the jobs whose step moved since their last
    turn and that had none within PROGRESS_READ_SECONDS (less a second: the round's reads
    may end earlier than the last round's did), longest ago (or never) first."""
    never = datetime.min.replace(tzinfo=now.tzinfo)
    waiting = [
        (reading.shown_at or never, key)
        for key, reading in readings.items()
        if reading.report.step != reading.shown_step
        and (
            reading.shown_at is None
            or (now - reading.shown_at).total_seconds() >= PROGRESS_READ_SECONDS - 1
        )
    ]
    return [key for _, key in sorted(waiting)[:budget]]

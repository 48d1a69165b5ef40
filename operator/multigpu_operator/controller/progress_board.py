"""What each running job's training processes last reported (policy/training.py), read
from their metrics endpoints, and when a job's status may show it.

Every PROGRESS_READ_SECONDS the leader reads replica 0's first process of each running
job (a few hundred bytes over HTTP, no API request). Once a job's step has stood still
for a round, every process of the job is read too, so that a stall names the ranks that
stopped. The readings stay in memory; a pass gets the latest (Observed.training).

Writing progress into the status costs an API request, so it has a budget: a job is
published (its next pass may write status.progress) at most every PROGRESS_READ_SECONDS,
and all jobs together at most `writes_per_second`, the ones shown longest ago first. Up to
writes_per_second x PROGRESS_READ_SECONDS running jobs (30 by default) each status is
fresh within that period; beyond, every job's turn comes round more slowly. Stalls do not
wait for a turn: the pass reads the latest reading whatever was published.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from multigpu_operator.api.pod_labels import attempt_of, replica_index
from multigpu_operator.api.spec import Mode
from multigpu_operator.api.status import Phase
from multigpu_operator.api.template import trainer_index
from multigpu_operator.cluster.informer import JobKey, PodInformer
from multigpu_operator.controller.plan_cache import PlanCache
from multigpu_operator.plan.env import metrics_port
from multigpu_operator.policy import training as gauges
from multigpu_operator.policy.kube.pods import being_deleted
from multigpu_operator.policy.training import (
    PROGRESS_READ_SECONDS,
    ProcessReport,
    TrainingReport,
)

log = logging.getLogger(__name__)

# Reads in flight at once, over all jobs.
CONCURRENT_READS = 64


class Reader(Protocol):
    """cluster/process_metrics.py's ProcessMetrics; tests serve real endpoints."""

    async def read(self, ip: str, port: int) -> dict[str, float] | None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Target:
    """Where a job's processes serve their gauges."""

    attempt: int
    port: int  # of local rank 0; local rank r serves port + r
    processes: int  # per pod
    pods: tuple[Mapping[str, Any], ...]  # running pods of the attempt, by replica index


@dataclass(frozen=True)
class _Served:
    """What a job's plan says of its processes, for the spec (uid, generation) it was read at."""

    spec: tuple[Any, Any]
    port: int  # 0: the job serves no metrics
    processes: int
    elastic: bool


@dataclass
class _Job:
    report: TrainingReport
    shown_step: int | None = None  # the step last published
    shown_at: datetime | None = None


class ProgressBoard:
    def __init__(
        self,
        pods: PodInformer,
        jobs: Mapping[JobKey, Mapping[str, Any]],
        plans: PlanCache,
        reader: Reader,
        enqueue: Callable[[JobKey], None],
        clock: Callable[[], datetime],
        writes_per_second: float,
    ) -> None:
        self._pods = pods
        self._jobs = jobs
        self._plans = plans
        self._reader = reader
        self._enqueue = enqueue
        self._clock = clock
        self._budget = max(1, round(writes_per_second * PROGRESS_READ_SECONDS))
        self._seen: dict[JobKey, _Job] = {}
        self._served_at: dict[JobKey, _Served] = {}
        self._reads = asyncio.Semaphore(CONCURRENT_READS)

    def report(self, key: JobKey) -> TrainingReport | None:
        """The job's latest report; `publish` is True once per turn the budget gives."""
        seen = self._seen.get(key)
        if seen is None:
            return None
        report = seen.report
        if report.publish:
            seen.report = replace(report, publish=False)
        return report

    def forget(self, key: JobKey) -> None:
        self._seen.pop(key, None)
        self._served_at.pop(key, None)

    async def run(self) -> None:
        while True:
            try:
                await self.read_all()
            except Exception:  # a bug here must not end progress for every job
                log.exception("reading the jobs' progress failed")
            await asyncio.sleep(PROGRESS_READ_SECONDS)

    async def read_all(self) -> None:
        """One round: read every running job, then publish within the budget."""
        running = [
            key
            for key, body in self._jobs.items()
            if (body.get("status") or {}).get("phase") == Phase.RUNNING
        ]
        for key in self._seen.keys() - set(running):
            del self._seen[key]
        for key in self._served_at.keys() - set(running):
            del self._served_at[key]
        await asyncio.gather(*(self._read_job(key) for key in running))
        self._publish()

    async def _read_job(self, key: JobKey) -> None:
        body = self._jobs.get(key)
        if body is None:
            return
        target = await self._target(key, body)
        if target is None:
            self._seen.pop(key, None)
            return
        first = target.pods[0]
        if replica_index(first) != 0:
            return  # replica 0 is not running (yet): the step is its to say
        now = self._clock()
        read = await self._read(first, target.port)
        seen = self._seen.get(key)
        if seen is not None and seen.report.attempt != target.attempt:
            seen = None  # a new attempt starts its own count
        if read is None or gauges.STEP not in read:
            if seen is None:
                return  # nothing reported yet: a job that reports nothing has no progress
            report = seen.report
        else:
            report = _report(target.attempt, read, now, seen.report if seen else None)
        still = (now - report.last_change).total_seconds()
        if seen is not None and still >= _read_everyone_after(report):
            report = replace(report, processes=await self._read_everyone(target))
        else:
            report = replace(report, processes=())
        if seen is None:
            self._seen[key] = _Job(report)
        else:
            seen.report = replace(report, publish=seen.report.publish)

    def _publish(self) -> None:
        """Give this round's turns: jobs whose step moved since last shown, and not shown
        within PROGRESS_READ_SECONDS, longest ago (or never) first."""
        now = self._clock()
        due = [
            (seen.shown_at or datetime.min.replace(tzinfo=now.tzinfo), key)
            for key, seen in self._seen.items()
            if seen.report.step != seen.shown_step
            and (
                seen.shown_at is None
                or (now - seen.shown_at).total_seconds() >= PROGRESS_READ_SECONDS - 1
            )
        ]
        for _, key in sorted(due)[: self._budget]:
            seen = self._seen[key]
            seen.report = replace(seen.report, publish=True)
            seen.shown_step, seen.shown_at = seen.report.step, now
            self._enqueue(key)

    async def _served(self, key: JobKey, body: Mapping[str, Any]) -> _Served | None:
        """Where the job's processes serve, kept per spec: planning again each round would
        cost every running job a plan, and evict the plans its passes need."""
        meta = body["metadata"]
        spec = (meta.get("uid"), meta.get("generation"))
        known = self._served_at.get(key)
        if known is not None and known.spec == spec:
            return known
        planned = await self._plans.plan(body)
        if isinstance(planned, str) or not planned[1].pods:
            return None
        job, desired = planned
        containers: Sequence[Mapping[str, Any]] = desired.pods[0]["spec"]["containers"]
        container = containers[trainer_index(containers)]
        served = _Served(
            spec,
            metrics_port(container.get("env") or []),
            _processes(container),
            job.spec.mode is Mode.ELASTIC,
        )
        self._served_at[key] = served
        return served

    async def _target(self, key: JobKey, body: Mapping[str, Any]) -> Target | None:
        served = await self._served(key, body)
        if served is None or not served.port:
            return None
        attempt = int((body.get("status") or {}).get("attempt", 1))
        pods = sorted(
            (
                p
                for p in self._pods.pods_of(key)
                # An Elastic job's members are the pods of every attempt.
                if (attempt_of(p) <= attempt if served.elastic else attempt_of(p) == attempt)
                and not being_deleted(p)
                and (p.get("status") or {}).get("phase") == "Running"
                and (p.get("status") or {}).get("podIP")
            ),
            key=replica_index,
        )
        if not pods:
            return None
        return Target(attempt, served.port, served.processes, tuple(pods))

    async def _read(self, pod: Mapping[str, Any], port: int) -> dict[str, float] | None:
        async with self._reads:
            return await self._reader.read(pod["status"]["podIP"], port)

    async def _read_everyone(self, target: Target) -> tuple[ProcessReport, ...]:
        places = [(pod, local) for pod in target.pods for local in range(target.processes)]
        reads = await asyncio.gather(*(self._read(pod, target.port + lr) for pod, lr in places))
        return tuple(
            _process(pod, local, target.processes, read)
            for (pod, local), read in zip(places, reads, strict=True)
        )


def _report(
    attempt: int, read: Mapping[str, float], now: datetime, before: TrainingReport | None
) -> TrainingReport:
    step = int(read[gauges.STEP])
    checkpointing = read.get(gauges.CHECKPOINTING, 0.0) >= 1
    moved = before is None or step != before.step or checkpointing or before.checkpointing
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


def _read_everyone_after(report: TrainingReport) -> float:
    """How long the step stands still before every process is read: one reading period
    (so the names are there well before a stall deadline passes), or two steps of a job
    whose steps are slower than that."""
    return max(PROGRESS_READ_SECONDS, 2 * (report.step_seconds or 0.0))


def _process(
    pod: Mapping[str, Any], local: int, processes: int, read: Mapping[str, float] | None
) -> ProcessReport:
    replica = replica_index(pod)
    answered = read is not None and gauges.STEP in read
    return ProcessReport(
        pod=pod["metadata"]["name"],
        replica=replica,
        local_rank=local,
        rank=replica * processes + local,
        node=(pod.get("spec") or {}).get("nodeName", ""),
        answered=answered,
        step=int(read[gauges.STEP]) if read is not None and answered else None,
        checkpointing=bool(read and read.get(gauges.CHECKPOINTING, 0.0) >= 1),
    )


def _processes(container: Mapping[str, Any]) -> int:
    """Processes per pod: torchrun's --nproc-per-node as the planner set it, else one."""
    for var in container.get("env") or []:
        if var.get("name") == "PET_NPROC_PER_NODE" and str(var.get("value", "")).isdigit():
            return int(var["value"])
    return 1

"""What each running job's training processes last reported, read from their metrics
endpoints: the loop, the HTTP reads and the readings held in memory. Which processes to
read, what their readings make and when a job's status may show them are
policy/progress_reads.py's (pure).

Every PROGRESS_READ_SECONDS the leader reads each running job (a few hundred bytes over
HTTP, no API request), then gives the round's publish turns within the write budget. A
pass reads the job's latest report through `take_turn` (Observed.training), which takes
a turn waiting for it; `report` only looks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from multigpu_operator.cluster.informer import JobKey, PodInformer
from multigpu_operator.controller.plan_cache import PlanCache
from multigpu_operator.policy.progress_reads import (
    JobReading,
    Place,
    Served,
    current,
    due,
    everyone,
    folded,
    leader,
    process_reports,
    reads_everyone,
    running_jobs,
    served,
    target,
    turn_budget,
)
from multigpu_operator.policy.training import PROGRESS_READ_SECONDS, TrainingReport

log = logging.getLogger(__name__)

# Reads in flight at once, over all jobs.
CONCURRENT_READS = 64


class Reader(Protocol):
    """cluster/process_metrics.py's ProcessMetrics; tests serve real endpoints."""

    async def read(self, ip: str, port: int) -> dict[str, float] | None: ...

    async def close(self) -> None: ...


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
        self._budget = turn_budget(writes_per_second)
        self._seen: dict[JobKey, JobReading] = {}
        # Where each job's processes serve, with the spec (uid, generation) it was read at.
        self._served_at: dict[JobKey, tuple[tuple[Any, Any], Served]] = {}
        self._reads = asyncio.Semaphore(CONCURRENT_READS)

    def report(self, key: JobKey) -> TrainingReport | None:
        """The job's latest report, `publish` True while a turn waits for its next pass.
        Reading it changes nothing."""
        seen = self._seen.get(key)
        return None if seen is None else seen.for_pass()

    def take_turn(self, key: JobKey) -> TrainingReport | None:
        """The job's latest report for the pass about to run: as `report`, and a turn
        waiting (`publish` True) is this pass's; the next pass gets `publish` False until
        the job's next turn."""
        seen = self._seen.get(key)
        if seen is None:
            return None
        if seen.turn:
            self._seen[key] = seen.taken()
        return seen.for_pass()

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
        """One round: read every running job, then give the turns the budget allows."""
        running = running_jobs(self._jobs)
        for key in self._seen.keys() - set(running):
            del self._seen[key]
        for key in self._served_at.keys() - set(running):
            del self._served_at[key]
        await asyncio.gather(*(self._read_job(key) for key in running))
        now = self._clock()
        for key in due(self._seen, now, self._budget):
            self._seen[key] = self._seen[key].given_turn(now)
            self._enqueue(key)

    async def _read_job(self, key: JobKey) -> None:
        body = self._jobs.get(key)
        if body is None:
            return
        where = await self._served(key, body)
        chosen = None if where is None else target(where, body, self._pods.pods_of(key))
        if chosen is None:
            self._seen.pop(key, None)
            return
        first = leader(chosen)
        if first is None:
            return
        now = self._clock()
        read = await self._read(first)
        before = current(self._seen.get(key), chosen.attempt)
        report = folded(before.report if before else None, chosen.attempt, read, now)
        if report is None:
            return
        if before is not None and reads_everyone(report, now):
            places = everyone(chosen)
            reads = await asyncio.gather(*(self._read(place) for place in places))
            report = replace(report, processes=process_reports(places, chosen.processes, reads))
        else:
            report = replace(report, processes=())
        if before is None:
            self._seen[key] = JobReading(report)
        elif (seen := self._seen.get(key)) is not None:  # as it is now: a pass may take a turn
            self._seen[key] = seen.recorded(report)

    async def _served(self, key: JobKey, body: Mapping[str, Any]) -> Served | None:
        """Where the job's processes serve, kept per spec: planning again each round would
        cost every running job a plan, and evict the plans its passes need."""
        meta = body["metadata"]
        spec = (meta.get("uid"), meta.get("generation"))
        known = self._served_at.get(key)
        if known is not None and known[0] == spec:
            return known[1]
        planned = await self._plans.plan(body)
        if isinstance(planned, str) or not planned[1].pods:
            return None
        job, desired = planned
        where = served(desired.pods[0], job.spec.mode)
        self._served_at[key] = (spec, where)
        return where

    async def _read(self, place: Place) -> dict[str, float] | None:
        async with self._reads:
            return await self._reader.read(place.ip, place.port)

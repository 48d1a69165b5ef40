"""One reconcile pass of a job: its inputs read from the caches, the pure pass
(reconcile.decide) run on them, its Decision handed to the actuator.

The inputs: the job as kopf's watch last brought it, its plan (plan_cache.py), its pods (the
pod informer), the nodes, its standing in Kueue, what the API server refused in its last
pass, and what its processes last reported (progress_board.py). Nothing here writes:
the actuator (actuator/) does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from multigpu_operator.actuator import Actuator
from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.cluster.informer import JobKey, PodInformer
from multigpu_operator.cluster.kueue_jobs import KueueJobs
from multigpu_operator.cluster.nodes import NodeInformer
from multigpu_operator.controller.plan_cache import PlanCache, offload
from multigpu_operator.controller.progress_board import ProgressBoard
from multigpu_operator.objects import managed_here, owned_by
from multigpu_operator.policy.fail import invalid_job
from multigpu_operator.policy.kueue_admission import admission_of
from multigpu_operator.policy.queueing import (
    dispatched_workload_change,
    multikueue_dispatched,
    queued_in_kueue,
)
from multigpu_operator.policy.refusals import Refusal
from multigpu_operator.reconcile import decide


class JobPass:
    def __init__(
        self,
        pods: PodInformer,
        nodes: NodeInformer,
        kueue: KueueJobs,
        plans: PlanCache,
        actuator: Actuator,
        clock: Callable[[], datetime],
        progress: ProgressBoard | None = None,
    ) -> None:
        self.pods = pods
        self.nodes = nodes
        self.kueue = kueue
        self.plans = plans
        self.actuator = actuator
        self._clock = clock  # the time decisions and timestamps are made at
        self.progress = progress

    async def run(
        self,
        key: JobKey,
        body: dict[str, Any],
        refusal: Refusal | None,
    ) -> None:
        planned = await self.plans.plan(body)
        if isinstance(planned, str) and not managed_here(body):
            return
        if isinstance(planned, str):
            stored = JobStatus.read(body.get("status") or {})
            generation = int(body["metadata"].get("generation", 1))
            failed = invalid_job(stored, generation, "InvalidSpec", planned, self._clock())
            await self.actuator.fail(body, failed)
            return
        job, desired = planned
        if not job.spec.managed_here:
            # Another controller's job: no pods, no status; a job MultiKueue dispatches
            # still needs its Workload here (Kueue's job-framework part is ours).
            if multikueue_dispatched(job) and self._queued(job):
                workload = self.kueue.informer.workload_of(key, job)
                change = dispatched_workload_change(workload)
                await self.actuator.sync_workload(job, desired, change, workload)
            return
        pods = [p for p in self.pods.pods_of(key) if owned_by(p, job.ref.uid)]
        gone = [p for p in self.pods.gone_of(key) if owned_by(p, job.ref.uid)]
        admission, workload = None, None
        if self._queued(job):
            workload = self.kueue.informer.workload_of(key, job)
            admission = admission_of(workload, self.kueue.informer.flavors_by_name())
        decision = await offload(
            len(desired.pods),
            decide,
            job,
            desired,
            pods,
            body.get("status") or {},
            self._clock(),
            self.nodes.nodes(),
            admission,
            workload,
            refusal,
            self.progress.report(key) if self.progress is not None else None,
            gone,
        )
        await self.actuator.carry_out(body, job, desired, pods, decision, workload)

    def _queued(self, job: Job) -> bool:
        return queued_in_kueue(self.kueue.mode, self.kueue.informer.installed, job)

"""One reconcile pass of a job: its inputs read from the caches, the pure pass
(reconcile.decide) run on them, its Decision handed to the actuator.

The inputs: the job as kopf's watch last brought it, its plan (plan_cache.py), its pods (the
pod informer), the nodes, its standing in Kueue, what the API server refused in its last
pass, and what its processes last reported (progress_board.py). Nothing here writes:
the actuator (actuator/) does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from multigpu_operator.actuator import Actuator, WaitingFor
from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.cluster.foreign_pods import ForeignPods
from multigpu_operator.cluster.informer import JobKey, PodInformer, ServiceInformer
from multigpu_operator.cluster.kueue_jobs import KueueJobs
from multigpu_operator.cluster.nodes import NodeInformer
from multigpu_operator.controller.plan_cache import PlanCache, offload
from multigpu_operator.controller.progress_board import ProgressBoard
from multigpu_operator.objects import managed_here, owned_by
from multigpu_operator.policy.inputs import PassInputs
from multigpu_operator.policy.kube.kueue_admission import admission_of
from multigpu_operator.policy.placement.occupancy import Occupancy, occupancy
from multigpu_operator.policy.steps.queueing import queued_in_kueue
from multigpu_operator.policy.steps.refusals import Refusal
from multigpu_operator.reconcile import decide

# How long the first pass of a job placed by topology waits for the nodes' first list.
NODES_FIRST_LIST_SECONDS = 10.0


class JobPass:
    def __init__(
        self,
        pods: PodInformer,
        services: ServiceInformer,
        nodes: NodeInformer,
        kueue: KueueJobs,
        plans: PlanCache,
        actuator: Actuator,
        clock: Callable[[], datetime],
        progress: ProgressBoard | None = None,
        runtimes_listed: Callable[[], bool] = lambda: True,
        foreign: ForeignPods | None = None,
    ) -> None:
        self.pods = pods
        self.services = services
        self.nodes = nodes
        self.kueue = kueue
        self.plans = plans
        self.actuator = actuator
        self._clock = clock  # the time decisions and timestamps are made at
        self.progress = progress
        # Whether the runtimes' caches were listed: until then a runtime not found may
        # only not be seen yet (cluster/runtimes.py).
        self.runtimes_listed = runtimes_listed
        # Other workloads' pods, listed from the first job placed here that needs them.
        self.foreign = foreign
        self._nodes_waited = False  # a placed job waited for the nodes' first list

    async def run(
        self,
        key: JobKey,
        body: dict[str, Any],
        refusal: Refusal | None,
    ) -> None:
        inputs = await self.inputs(key, body, refusal)
        size = 0 if isinstance(inputs.planned, str) else len(inputs.planned[1].pods)
        decision = await offload(size, decide, inputs)
        await self.actuator.carry_out(body, inputs, decision)

    async def inputs(
        self, key: JobKey, body: dict[str, Any], refusal: Refusal | None
    ) -> PassInputs:
        """What the pass reads, from the caches; a job that cannot be planned, or is
        another controller's, needs nothing but its status."""
        meta = body["metadata"]
        planned = await self.plans.plan(body)
        common = PassInputs(
            planned=planned,
            previous=JobStatus.read(body.get("status") or {}),
            generation=int(meta.get("generation", 1)),
            now=self._clock(),
            managed_here=managed_here(body),
            refusal=refusal,
            runtime=self.plans.runtime_of(body),
        )
        if common.runtime is not None and common.runtime.snapshot is None:
            if not self.runtimes_listed():
                raise WaitingFor("the runtimes are not listed yet")
            return common
        if isinstance(planned, str):
            return common
        job = planned[0]
        queued = self._queued(job)
        workload = self.kueue.informer.workload_of(key, job) if queued else None
        served = self.kueue.informer.installed
        priority = None
        if queued and workload is None and job.priority_class:
            priority = await self.kueue.priority_class(job.priority_class)  # to create it
        common = replace(
            common, queued=queued, workload=workload, kueue_served=served, priority=priority
        )
        if not job.spec.managed_here:
            return common
        uid = job.ref.uid
        pods = tuple(p for p in self.pods.pods_of(key) if owned_by(p, uid))
        # First: a placed job's first pass may wait here for the nodes' first list.
        held = await self._occupancy(job, queued, pods, len(planned[1].pods))
        admission = None
        if queued:
            admission = admission_of(workload, self.kueue.informer.flavors_by_name())
        return replace(
            common,
            pods=pods,
            gone=tuple(p for p in self.pods.gone_of(key) if owned_by(p, uid)),
            nodes=self.nodes.nodes(),
            occupancy=held,
            unseen=frozenset(self.pods.unseen(key)),
            has_service=self.services.has_service(key, uid),
            admission=admission,
            training=self.progress.take_turn(key) if self.progress is not None else None,
            template_checked=self.actuator.templates.checked(uid),
            counts_held_since=self.actuator.status.counts_held_since(key),
        )

    async def _occupancy(
        self, job: Job, queued: bool, pods: tuple[dict[str, Any], ...], wanted: int
    ) -> Occupancy | None:
        """What the operator's pods and other workloads' hold, for a job placed by
        topology that has pods to create or to schedule (the passes that read every pod
        the operator knows). Other workloads' pods are read (and first listed) only for
        a job Kueue does not place: Kueue counts them itself."""
        if job.spec.placement is None:
            return None
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        if len(live) >= wanted and all(p["spec"].get("nodeName") for p in live):
            return None
        if queued:
            return occupancy(self.pods.all_pods(), job.ref.uid)
        await self._nodes_listed()
        foreign = await self.foreign.held() if self.foreign else None
        return occupancy(self.pods.all_pods(), job.ref.uid, foreign)

    async def _nodes_listed(self) -> None:
        """Wait for the nodes' first list (once, up to NODES_FIRST_LIST_SECONDS): without
        nodes a placed job's pods would be created unpinned (placed.py), and moved later."""
        if self._nodes_waited or self.nodes.synced.is_set():
            return
        try:
            async with asyncio.timeout(NODES_FIRST_LIST_SECONDS):
                await self.nodes.synced.wait()
        except TimeoutError:
            pass  # RBAC without nodes, or a slow list: placed as without nodes
        finally:
            self._nodes_waited = True

    def _queued(self, job: Job) -> bool:
        return queued_in_kueue(self.kueue.mode, self.kueue.informer.installed, job)

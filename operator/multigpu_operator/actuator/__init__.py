"""The actuator: the one place a reconcile pass acts on the cluster.

It carries out a Decision (policy/step.py) as a fixed order of named steps: check the
pod template (the dry-run pod it names), write the status (counters before any
pod is touched), delete pods, create the headless Service, create pods, sync the Kueue
Workload, delete the job, requeue. A step the server refuses ends the pass with
`Refused`: the refusal is the job's next pass's input (policy/steps/refusals.py), never a
status built here. Nothing here decides what to do; only how to do it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from multigpu_operator import metrics
from multigpu_operator.actuator.children import (
    TemplateChecks,
    create_pods,
    create_service,
    refusal,
)
from multigpu_operator.actuator.kueue import WorkloadWrites
from multigpu_operator.actuator.status import StatusWrites
from multigpu_operator.api.spec import Job
from multigpu_operator.cluster.errors import Invalid
from multigpu_operator.cluster.informer import JobKey, PodInformer, ServiceInformer
from multigpu_operator.cluster.kinds import JOBS, PODS
from multigpu_operator.cluster.kueue_jobs import KueueJobs
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.policy.inputs import PassInputs
from multigpu_operator.policy.step import Decision, StatusUpdate, WorkloadChange
from multigpu_operator.policy.steps.refusals import Refusal

log = logging.getLogger(__name__)


class WaitingFor(Exception):
    """A pass that cannot finish for a reason that may pass (a full quota): its job is
    looked at again after the retry backoff, without counting an error."""


class Refused(Exception):
    """The API server refused what the pass sent: the job's next pass reads why."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class Actuator:
    def __init__(
        self,
        cluster: Cluster,
        pods: PodInformer,
        services: ServiceInformer,
        kueue: KueueJobs,
        wake: Callable[[JobKey, float], None],
    ) -> None:
        self.cluster = cluster
        self.pods = pods
        self.services = services
        self.status = StatusWrites(cluster, wake)
        self.templates = TemplateChecks(cluster)  # dry runs of templates
        self.workloads = WorkloadWrites(cluster, kueue)
        self._wake = wake

    def forget(self, key: JobKey, uid: str) -> None:
        self.templates.forget(uid)
        self.status.forget(key)

    async def carry_out(self, body: dict[str, Any], inputs: PassInputs, decision: Decision) -> None:
        """Carry out `decision` for the job `body`; raises Refused, WaitingFor."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        if decision.only_status:
            update = StatusUpdate(decision.status, decision.events, decision.entered)
            await self.status.write(body, update)
            self.requeue(key, decision)
            return
        if isinstance(inputs.planned, str):
            return  # another controller's job that does not plan: nothing to do
        job = inputs.planned[0]
        if decision.only_workload:
            await self.sync_workload(job, decision.workload, inputs.workload)
            return
        try:
            await self.check_template(job, decision)
            written = await self.write_status(body, inputs, job, decision)
        except Refused as refused:
            # The next pass starts from the status this one did not write.
            raise Refused(replace(refused.refusal, unwritten=decision.status)) from refused
        if not written:
            return
        try:
            await self.delete_pods(job, decision)
            await self.create_service(key, job, decision)
            await self.create_pods(key, job, decision)
        except Refused as refused:
            if not decision.status_waits:
                raise
            raise Refused(replace(refused.refusal, unwritten=decision.status)) from refused
        await self.sync_workload(job, decision.workload, inputs.workload)
        await self.delete_job(key, job, decision)
        self.requeue(key, decision)

    async def check_template(self, job: Job, decision: Decision) -> None:
        """The pass's dry-run pod, if it has one, checks the template of a job that
        creates no pod yet."""
        refused = await self.templates.check(job, decision)
        if refused is not None:
            raise Refused(refusal(job.ref.uid, "PodTemplate", refused))

    async def write_status(
        self, body: dict[str, Any], inputs: PassInputs, job: Job, decision: Decision
    ) -> bool:
        """Counters first: once the status says "attempt 3", a crash cannot make it 2
        again. False: the job changed meanwhile, the pass ends."""
        if decision.status_waits:
            return True
        if decision.status_held_for:
            key = (job.ref.namespace, job.ref.name)
            self.status.hold(key, inputs.now, decision.status_held_for)
            return True
        update = StatusUpdate(decision.status, decision.events, decision.entered)
        try:
            written = await self.status.write(body, update)
        except Invalid as err:
            raise Refused(Refusal(job.ref.uid, "Status", err.message, invalid=True)) from err
        if written and decision.restarts:
            metrics.RESTARTS.labels(job.ref.namespace, job.spec.mode.value).inc(decision.restarts)
        return written

    async def delete_pods(self, job: Job, decision: Decision) -> None:
        await asyncio.gather(
            *(
                self.cluster.delete(PODS, job.ref.namespace, name, uid)
                for name, uid in decision.deletes
            )
        )

    async def create_service(self, key: JobKey, job: Job, decision: Decision) -> None:
        """The Service before the pods (their DNS names)."""
        if decision.create_service is None:
            return
        refused = await create_service(self.cluster, self.services, key, decision.create_service)
        if refused is not None:
            raise Refused(refusal(job.ref.uid, "Service", refused))

    async def create_pods(self, key: JobKey, job: Job, decision: Decision) -> None:
        refused = await create_pods(self.cluster, self.pods, key, decision.create_pods)
        if refused is not None:
            raise Refused(refusal(job.ref.uid, "Pod", refused))

    async def sync_workload(
        self, job: Job, change: WorkloadChange | None, workload: Mapping[str, Any] | None
    ) -> None:
        if change is not None:
            waiting = await self.workloads.write(job, change, workload)
            if waiting:
                raise WaitingFor(waiting)

    async def delete_job(self, key: JobKey, job: Job, decision: Decision) -> None:
        if decision.delete_job:
            log.info("deleting %s/%s: ttlSecondsAfterFinished passed", *key)
            # Only that very job; its children go with it by garbage collection.
            ref = job.ref
            await self.cluster.delete(JOBS, ref.namespace, ref.name, ref.uid, "Background")

    def requeue(self, key: JobKey, decision: Decision) -> None:
        if decision.waiting:
            raise WaitingFor(decision.waiting)
        if decision.requeue_after is not None:
            self._wake(key, decision.requeue_after)

    async def release_deleted(self, key: JobKey) -> None:
        await self.workloads.release_deleted(key)

"""Queued jobs' Workloads, read and written (the I/O of Kueue admission; the decisions
are policy/queueing.py's).

MGJ_KUEUE says whether jobs labelled `kueue.x-k8s.io/queue-name` are queued in Kueue:
`auto` (the default) when Kueue's Workload API is served at start-up, `on` always (a
queued job waits while the API is missing), `off` never (the label is ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from multigpu_operator.api import kueue
from multigpu_operator.api.spec import Job
from multigpu_operator.cluster.errors import ClusterError, Conflict, NotFound
from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.workloads import WorkloadInformer
from multigpu_operator.plan import DesiredState
from multigpu_operator.plan.workload import PriorityClass, build_workload
from multigpu_operator.policy.kueue_admission import Admission, admission_of
from multigpu_operator.policy.queueing import dispatched_workload_change
from multigpu_operator.policy.step import WorkloadChange

log = logging.getLogger(__name__)

MODES = ("auto", "on", "off")


class KueueJobs:
    """The controller's view of Kueue: which jobs are queued, where each stands, and
    the writes policy/queueing.py decides on their Workloads."""

    def __init__(
        self,
        cluster: Cluster,
        enqueue: Callable[[JobKey], None],
        namespace: str | None,
        mode: str,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"MGJ_KUEUE must be one of {', '.join(MODES)}, not {mode!r}")
        self._cluster = cluster
        self.mode = mode
        self.informer = WorkloadInformer(cluster, enqueue, namespace, required=mode == "on")

    def queued(self, job: Job) -> bool:
        """Whether `job` runs only when Kueue admits it."""
        if self.mode == "off" or not job.queue_name:
            return False
        return self.mode == "on" or self.informer.installed

    def standing(self, key: JobKey, job: Job) -> tuple[Admission, dict[str, Any] | None]:
        """Where a queued job stands, and its Workload as last seen."""
        workload = self.informer.workload_of(key, job)
        return admission_of(workload, self.informer.flavors_by_name()), workload

    async def dispatched(self, key: JobKey, job: Job, desired: DesiredState) -> str | None:
        """A job MultiKueue runs elsewhere: its Workload only (policy/queueing.py)."""
        if not (job.queue_name and job.spec.managed_by == kueue.MULTIKUEUE_CONTROLLER):
            return None
        if not self.queued(job):
            return None
        workload = self.informer.workload_of(key, job)
        change = dispatched_workload_change(workload)
        return await self.write(job, desired, change, workload) if change else None

    async def write(
        self,
        job: Job,
        desired: DesiredState,
        change: WorkloadChange,
        workload: Mapping[str, Any] | None,
    ) -> str | None:
        """Carry out `change`; what the job waits for, if it cannot be done yet."""
        namespace = job.ref.namespace
        if change.create:
            if not self.informer.installed:
                return "Kueue's Workload API is not served (MGJ_KUEUE=on)"
            if job.prebuilt_workload:
                return f"MultiKueue's Workload {job.prebuilt_workload!r} is not there yet"
            priority = None
            name = job.priority_class
            if name:
                try:
                    found = await self._cluster.get_kueue(kueue.WORKLOAD_PRIORITY_CLASSES, name)
                except NotFound:
                    return f"WorkloadPriorityClass {name!r} does not exist"
                priority = PriorityClass(name, int(found.get("value", 0)))
            body = build_workload(job, desired, priority)
            await self._cluster.create_workload(namespace, body)
            self.informer.created((namespace, job.ref.name), body)
            return None
        assert workload is not None
        meta = workload["metadata"]
        try:
            if change.status is not None:
                await self._cluster.patch_workload(
                    namespace,
                    meta["name"],
                    {"status": change.status},
                    meta["resourceVersion"],
                    True,
                )
            if change.release:
                await self._drop_finalizer(namespace, workload)
        except (Conflict, NotFound) as err:
            # Changed meanwhile (its watch event brings the job back here) or gone.
            log.info("Workload %s/%s not written: %s", namespace, meta["name"], err.message)
        return None

    async def release_deleted(self, key: JobKey) -> None:
        """The job is gone: drop the finalizer of its Workload once garbage collection
        deletes it (Kueue's job framework does so for a Workload being deleted)."""
        workload = self.informer.any_workload_of(key)
        if workload is None or not workload["metadata"].get("deletionTimestamp"):
            return
        try:
            await self._drop_finalizer(key[0], workload)
        except NotFound:
            pass  # gone already
        except ClusterError as err:
            log.warning(
                "Workload %s/%s keeps Kueue's finalizer: %s",
                key[0],
                workload["metadata"]["name"],
                err.message,
            )

    async def _drop_finalizer(self, namespace: str, workload: Mapping[str, Any]) -> None:
        """Without Kueue's resource-in-use finalizer. Unconditional: nothing else of the
        Workload changes, and after the job is deleted no later pass would retry."""
        meta = workload["metadata"]
        finalizers = meta.get("finalizers") or []
        if kueue.RESOURCE_IN_USE_FINALIZER not in finalizers:
            return
        kept = [f for f in finalizers if f != kueue.RESOURCE_IN_USE_FINALIZER]
        await self._cluster.patch_workload(
            namespace, meta["name"], {"metadata": {"finalizers": kept}}, None
        )

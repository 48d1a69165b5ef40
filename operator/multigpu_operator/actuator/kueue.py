"""The actuator's writes of queued jobs' Kueue Workloads (policy/steps/queueing.py decides
them): create, patch the status, drop Kueue's finalizer."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from multigpu_operator.api import kueue
from multigpu_operator.api.spec import Job
from multigpu_operator.cluster.errors import ClusterError, Conflict, NotFound
from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.cluster.kinds import WORKLOADS
from multigpu_operator.cluster.kueue_jobs import KueueJobs
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.policy.step import WorkloadChange
from multigpu_operator.policy.steps.queueing import (
    holds_quota,
    release_after_delete,
)

log = logging.getLogger(__name__)


class WorkloadWrites:
    def __init__(self, cluster: Cluster, kueue_jobs: KueueJobs) -> None:
        self._cluster = cluster
        self._kueue = kueue_jobs

    async def write(
        self,
        job: Job,
        change: WorkloadChange,
        workload: Mapping[str, Any] | None,
    ) -> str | None:
        """Carry out `change`; what the job waits for, if it cannot be done yet."""
        namespace = job.ref.namespace
        if change.waits:
            return change.waits
        if change.body is not None:
            await self._cluster.create(WORKLOADS, namespace, change.body, read_back=False)
            self._kueue.informer.created((namespace, job.ref.name), change.body)
            return None
        assert workload is not None
        meta = workload["metadata"]
        try:
            if change.status is not None:
                status = {"status": change.status}
                await self._cluster.patch(
                    WORKLOADS, namespace, meta["name"], status, meta["resourceVersion"], "status"
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
        workload = self._kueue.informer.any_workload_of(key)
        if workload is None or not release_after_delete(workload):
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
        if not holds_quota(workload):
            return
        kept = [f for f in meta["finalizers"] if f != kueue.RESOURCE_IN_USE_FINALIZER]
        await self._cluster.patch(
            WORKLOADS, namespace, meta["name"], {"metadata": {"finalizers": kept}}
        )

"""Caches of the Kueue objects a queued job depends on: the jobs' Workloads (by the job
that owns them) and the ResourceFlavors (by name). List once, then watch, relisting
when the watch expires, like the pod informer.

A Workload event wakes the job that owns it: Kueue admitting, evicting or finishing a
Workload is what moves a queued job on. Workloads are kept trimmed to their metadata
and status (their pod templates are the job's own and can be large).

When Kueue's CRDs are not installed the list answers 404: the cache says so
(`installed` False). With MGJ_KUEUE=auto it stops there, and the operator runs labelled
jobs as it does without Kueue until it is restarted; with MGJ_KUEUE=on it keeps
looking, and queued jobs wait until the API is served.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from multigpu_operator.api import kueue
from multigpu_operator.api.names import LABEL_JOB_NAME
from multigpu_operator.api.spec import KIND, Job
from multigpu_operator.cluster.errors import ClusterError, NotFound
from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.cluster.kinds import RESOURCE_FLAVORS, WORKLOADS, Kind
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.reflector import Reflected, Reflector

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace or "", name)
_KEPT_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "ownerReferences",
    "finalizers",
    "deletionTimestamp",
)


def trim_workload(workload: Mapping[str, Any]) -> dict[str, Any]:
    """Keep what policy/kube/kueue_admission.py and the Workload writes read."""
    meta = workload["metadata"]
    return {
        "metadata": {k: meta[k] for k in _KEPT_METADATA if k in meta},
        "spec": {k: v for k, v in (workload.get("spec") or {}).items() if k != "podSets"},
        "status": dict(workload.get("status") or {}),
    }


def owner_job(workload: Mapping[str, Any]) -> tuple[JobKey, str] | None:
    """The MultiGPUJob that controls `workload`, and its UID ("" for a Workload that
    MultiKueue made in a worker cluster: it carries the job's name label, no owner)."""
    meta = workload["metadata"]
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == KIND and ref.get("controller"):
            return (meta["namespace"], ref["name"]), ref["uid"]
    job_name = (meta.get("labels") or {}).get(LABEL_JOB_NAME)
    if job_name and (meta.get("labels") or {}).get(kueue.MULTIKUEUE_ORIGIN_LABEL):
        return (meta["namespace"], job_name), ""
    return None


class KueueObjects(Reflected):
    """One kind of Kueue object, as a Reflector lists and watches it; `changed` is told
    of each change."""

    def __init__(
        self,
        cluster: Cluster,
        kind: Kind,
        namespace: str | None,
        trim: Callable[[Mapping[str, Any]], dict[str, Any]],
        changed: Callable[[dict[str, Any]], None] = lambda obj: None,
        required: bool = False,
    ) -> None:
        self._plural = kind.plural
        self._changed = changed
        self.objects: dict[ObjectKey, dict[str, Any]] = {}
        self.installed = True
        self._required = required
        self.reflector = Reflector(
            kind.plural,
            lambda: cluster.list(kind, namespace),
            lambda rv: cluster.watch(kind, rv, namespace),
            trim,
            self,
            backoff_cap=60,
            on_failure=self._failed,
        )

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self.installed = True
        before = self.objects
        self.objects = {_key(obj): obj for obj in objects}
        for key, obj in before.items():
            if key not in self.objects:
                self._changed(obj)  # deleted while the watch was down
        for obj in self.objects.values():
            self._changed(obj)

    def apply(self, event: str, obj: dict[str, Any]) -> None:
        if event == "DELETED":
            self.objects.pop(_key(obj), None)
        else:
            self.objects[_key(obj)] = obj
        self._changed(obj)

    def _failed(self, err: ClusterError, failures: int, retry_in: float) -> bool:
        if not isinstance(err, NotFound):
            log.warning("cannot read %s (%s); retrying", self._plural, err.message)
            return True
        self.installed = False
        self.synced.set()
        if not self._required:
            log.info("Kueue's %s are not served: no job is queued in Kueue", self._plural)
            return False
        log.warning("Kueue's %s are not served (MGJ_KUEUE=on); looking again", self._plural)
        return True


class WorkloadInformer:
    """The Workloads of MultiGPUJobs, by job, and the ResourceFlavors they are admitted on."""

    def __init__(
        self,
        cluster: Cluster,
        enqueue: Callable[[JobKey], None],
        namespace: str | None,
        required: bool = False,
    ) -> None:
        self._enqueue = enqueue
        self._by_job: dict[JobKey, dict[str, Any]] = {}
        self.workloads = KueueObjects(
            cluster, WORKLOADS, namespace, trim_workload, self._workload_changed, required
        )
        self.flavors = KueueObjects(cluster, RESOURCE_FLAVORS, None, dict, required=required)

    @property
    def installed(self) -> bool:
        return self.workloads.installed

    async def run(self) -> None:
        await asyncio.gather(self.workloads.run(), self.flavors.run())

    async def synced(self) -> None:
        await self.workloads.synced.wait()
        await self.flavors.synced.wait()

    def workload_of(self, key: JobKey, job: Job) -> dict[str, Any] | None:
        """The job's Workload as last seen: the one it owns, or the one MultiKueue made
        for it (the job's prebuilt-workload-name label)."""
        if job.prebuilt_workload:
            return self.workloads.objects.get((key[0], job.prebuilt_workload))
        workload = self._by_job.get(key)
        if workload is None or (owner_job(workload) or ((), ""))[1] != job.ref.uid:
            return None
        return workload

    def any_workload_of(self, key: JobKey) -> dict[str, Any] | None:
        """The Workload last seen for a job of this name, whichever its UID."""
        return self._by_job.get(key)

    def flavors_by_name(self) -> dict[str, dict[str, Any]]:
        return {name: flavor for (_, name), flavor in self.flavors.objects.items()}

    def created(self, key: JobKey, workload: dict[str, Any]) -> None:
        """A Workload this operator just created: known before its watch event comes, so
        the next pass does not create it again."""
        self._by_job.setdefault(key, trim_workload(workload))

    def _workload_changed(self, workload: dict[str, Any]) -> None:
        owner = owner_job(workload)
        if owner is None:
            return
        key, _ = owner
        if _key(workload) in self.workloads.objects:
            self._by_job[key] = workload
        elif self._by_job.get(key, {}).get("metadata", {}).get("name") == _name(workload):
            del self._by_job[key]
        self._enqueue(key)


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])

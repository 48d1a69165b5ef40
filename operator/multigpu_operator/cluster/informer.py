"""Label-selected caches of the jobs' pods and Services, kept by a Reflector
(cluster/reflector.py) and indexed by job.

Only objects carrying the job label are asked for (the API server filters), and each is
kept trimmed to the fields the controller reads, so memory grows with the
operator's own children, never with the cluster's.

Our own watch rather than a kopf pod handler: a handler's `labels=` filter is applied by
kopf in-process, after listing every pod in scope. (kopf 1.45 can also select on the
server, settings.watching.label_selectors; this watch stays because a pod event here
costs a dict update and one wake-up of the job's key, the workers wait for its first
complete list, and the liveness probe reads its health age.)
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from multigpu_operator.api.names import CHILD_SELECTOR, LABEL_JOB_NAME
from multigpu_operator.cluster.kinds import PODS, SERVICES
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.reflector import Reflected, Reflector
from multigpu_operator.cluster.trim import trim_pod, trim_service
from multigpu_operator.objects import owned_by
from multigpu_operator.policy.failures.faults import disruption

JobKey = tuple[str, str]  # (namespace, job name)
V = TypeVar("V")


class ChildInformer(Reflected):
    """The children of one kind, by job, as a Reflector lists and watches them; a change
    wakes the job (`on_change`)."""

    def __init__(self, on_change: Callable[[JobKey], None]) -> None:
        self._on_change = on_change
        self._objects: dict[JobKey, dict[str, dict[str, Any]]] = defaultdict(dict)

    def replace(self, objects: list[dict[str, Any]]) -> None:
        fresh: dict[JobKey, dict[str, dict[str, Any]]] = defaultdict(dict)
        for obj in objects:
            key = _key(obj)
            if key:
                fresh[key][obj["metadata"]["name"]] = obj
        # Every job seen before or now looks again: one deleted while the watch was down too.
        changed = set(self._objects) | set(fresh)
        self._objects = fresh
        for key in changed:
            self._on_change(key)

    def apply(self, event: str, obj: dict[str, Any]) -> None:
        key = _key(obj)
        if not key:
            return
        name = obj["metadata"]["name"]
        if event == "DELETED":
            self._objects[key].pop(name, None)
            if not self._objects[key]:
                del self._objects[key]
        else:
            self._objects[key][name] = obj
        self._on_change(key)


class PodInformer(ChildInformer):
    """The jobs' pods, and the pods created but not seen yet (client-go's "expectations"):
    a pass that runs before the watch brings a created pod must not create it again,
    which cost 0.7 create requests per pod, answered 409, at 100 jobs at once."""

    # An expectation older than this is dropped (a pod created and deleted again while the
    # watch was down never shows up): the pod is created again, or found existing.
    EXPECTATION_SECONDS = 30.0
    # How long a pod deleted for a fault is kept, as the watch last showed it, for its
    # job's passes (gone_of).
    GONE_SECONDS = 300.0

    def __init__(
        self, cluster: Cluster, on_change: Callable[[JobKey], None], namespace: str | None = None
    ) -> None:
        super().__init__(on_change)
        self.reflector = Reflector(
            "pod",
            lambda: cluster.list(PODS, namespace, CHILD_SELECTOR),
            lambda rv: cluster.watch(PODS, rv, namespace, CHILD_SELECTOR),
            trim_pod,
            self,
        )
        self._unseen: dict[JobKey, dict[str, float]] = {}  # name -> loop time created
        self._gone: dict[JobKey, dict[str, tuple[float, dict[str, Any]]]] = {}

    def apply(self, event: str, obj: dict[str, Any]) -> None:
        # Kubernetes may mark a pod Failed and delete it at once (PodGC, grace 0, once
        # its node is removed): a pass may never see it Failed, only gone. Its last
        # state still says which fault ended it, so it is kept a while (only such pods:
        # a job's own deletes of thousands of pods keep nothing).
        key = _key(obj)
        if event == "DELETED" and key and disruption(obj) is not None:
            gone = self._gone.setdefault(key, {})
            gone[obj["metadata"]["name"]] = (asyncio.get_running_loop().time(), obj)
        super().apply(event, obj)

    def gone_of(self, key: JobKey) -> list[dict[str, Any]]:
        """The pods of job `key` deleted for a fault in the last GONE_SECONDS, as the
        watch last showed them."""
        oldest = asyncio.get_running_loop().time() - self.GONE_SECONDS
        kept = _pruned(self._gone, key, lambda _name, entry: entry[0] < oldest)
        return [pod for _, pod in kept.values()]

    def created(self, key: JobKey, name: str) -> None:
        """Pod `name` of job `key` was just created (or found existing)."""
        if name not in self._objects.get(key, {}):
            self._unseen.setdefault(key, {})[name] = asyncio.get_running_loop().time()

    def unseen(self, key: JobKey) -> set[str]:
        """Pods of job `key` created by us that the watch has not brought yet."""
        oldest = asyncio.get_running_loop().time() - self.EXPECTATION_SECONDS
        seen = self._objects.get(key, {})
        return set(_pruned(self._unseen, key, lambda name, at: name in seen or at < oldest))

    def pods_of(self, key: JobKey) -> list[dict[str, Any]]:
        return list(self._objects.get(key, {}).values())

    def all_pods(self) -> list[dict[str, Any]]:
        return [pod for pods in self._objects.values() for pod in pods.values()]


class ServiceInformer(ChildInformer):
    """The jobs' headless Services: a pass sees whether its job's Service exists without
    asking the API server, and a Service deleted by hand wakes its job."""

    def __init__(
        self, cluster: Cluster, on_change: Callable[[JobKey], None], namespace: str | None = None
    ) -> None:
        super().__init__(on_change)
        self.reflector = Reflector(
            "service",
            lambda: cluster.list(SERVICES, namespace, CHILD_SELECTOR),
            lambda rv: cluster.watch(SERVICES, rv, namespace, CHILD_SELECTOR),
            trim_service,
            self,
        )

    def has_service(self, key: JobKey, owner_uid: str) -> bool:
        """Whether the Service of job `key` (with UID `owner_uid`) exists, as last seen."""
        return any(owned_by(s, owner_uid) for s in self._objects.get(key, {}).values())

    def created(self, key: JobKey, service: Mapping[str, Any]) -> None:
        """The Service was just created (or found taken): count it as existing until the
        watch says otherwise, so the passes before its ADDED event do not create it again."""
        self._objects[key].setdefault(service["metadata"]["name"], trim_service(service))


def _key(obj: Mapping[str, Any]) -> JobKey | None:
    meta = obj["metadata"]
    job = meta.get("labels", {}).get(LABEL_JOB_NAME)
    return (meta["namespace"], job) if job else None


def _pruned(
    table: dict[JobKey, dict[str, V]], key: JobKey, stale: Callable[[str, V], bool]
) -> dict[str, V]:
    """Job `key`'s entries in `table` once the stale ones are dropped (and the job's, when
    none is left)."""
    entries = table.get(key)
    if not entries:
        return {}
    for name in [n for n, value in entries.items() if stale(n, value)]:
        del entries[name]
    if not entries:
        del table[key]
    return entries

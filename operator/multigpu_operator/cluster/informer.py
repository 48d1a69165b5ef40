"""Label-selected caches of the jobs' pods and Services: list once, then watch,
relisting when the watch expires.

Only objects carrying the job label are asked for (the API server filters), and each is
kept trimmed to the fields the controller reads, so memory grows with the
operator's own children, never with the cluster's.

Our own watch rather than a kopf pod handler: a handler's `labels=` filter is applied by
kopf in-process, after listing every pod in scope. (kopf 1.45 can also select on the
server, settings.watching.label_selectors; this watch stays because a pod event here
costs a dict update and one wake-up of the job's key, the workers wait for its first
complete list, and the liveness probe reads its heartbeat.)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from multigpu_operator.api.names import CHILD_SELECTOR, LABEL_JOB_NAME
from multigpu_operator.cluster.errors import ClusterError, Gone
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.trim import trim_pod, trim_service

log = logging.getLogger(__name__)

JobKey = tuple[str, str]  # (namespace, job name)


class ChildInformer:
    """The children of one kind, by job: one label-selected list, then watch events."""

    kind = "object"

    def __init__(
        self, cluster: Cluster, on_change: Callable[[JobKey], None], namespace: str | None = None
    ) -> None:
        self._cluster = cluster
        self._namespace = namespace
        self._on_change = on_change
        self._objects: dict[JobKey, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.synced = asyncio.Event()
        # Monotonic time of the last event, (re)connect or failed try: the liveness probe
        # fails when the loop has made no progress for too long (stuck), not while it keeps
        # retrying an API server that is down.
        self.last_heartbeat = time.monotonic()

    def _list(self) -> Awaitable[tuple[list[dict[str, Any]], str]]:
        raise NotImplementedError

    def _watch_from(self, rv: str) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError

    def trim(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def run(self) -> None:
        """List and watch forever; errors back off and relist."""
        backoff = 0.5
        while True:
            try:
                rv = await self._relist()
                backoff = 0.5
                while True:
                    rv = await self._watch(rv)
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("%s watch expired; relisting", self.kind)
            except ClusterError as err:
                # The API server down, overloaded or refusing: its answer says it all.
                log.warning(
                    "%s watch failed: HTTP %s: %s; relisting in %.1fs",
                    self.kind,
                    err.status,
                    err.message,
                    backoff,
                )
                backoff = await retry_after(backoff)
                self.last_heartbeat = time.monotonic()
            except Exception:
                log.exception("%s watch failed; relisting in %.1fs", self.kind, backoff)
                backoff = await retry_after(backoff)
                self.last_heartbeat = time.monotonic()

    async def _relist(self) -> str:
        items, rv = await self._list()
        fresh: dict[JobKey, dict[str, dict[str, Any]]] = defaultdict(dict)
        for obj in items:
            key = _key(obj)
            if key:
                fresh[key][obj["metadata"]["name"]] = self.trim(obj)
        changed = set(self._objects) | set(fresh)
        self._objects = fresh
        self.synced.set()
        self.last_heartbeat = time.monotonic()
        for key in changed:
            self._on_change(key)
        return rv

    async def _watch(self, rv: str) -> str:
        async for event in self._watch_from(rv):
            self.last_heartbeat = time.monotonic()
            obj = event["object"]
            rv = obj["metadata"]["resourceVersion"]
            if event["type"] == "BOOKMARK":
                continue
            key = _key(obj)
            if not key:
                continue
            name = obj["metadata"]["name"]
            if event["type"] == "DELETED":
                self._objects[key].pop(name, None)
                if not self._objects[key]:
                    del self._objects[key]
            else:
                self._objects[key][name] = self.trim(obj)
            self._on_change(key)
        self.last_heartbeat = time.monotonic()
        return rv


async def retry_after(backoff: float, cap: float = 30) -> float:
    """Wait `backoff` seconds, plus up to a fifth for jitter (replicas and watches that
    failed together do not all come back at once); the next, doubled, backoff."""
    await asyncio.sleep(backoff * (1 + 0.2 * random.random()))
    return min(backoff * 2, cap)


class PodInformer(ChildInformer):
    """The jobs' pods, and the pods created but not seen yet (client-go's "expectations"):
    a pass that runs before the watch brings a created pod must not create it again,
    which cost 0.7 create requests per pod, answered 409, at 100 jobs at once."""

    kind = "pod"
    # An expectation older than this is dropped (a pod created and deleted again while the
    # watch was down never shows up): the pod is created again, or found existing.
    EXPECTATION_SECONDS = 30.0

    def __init__(
        self, cluster: Cluster, on_change: Callable[[JobKey], None], namespace: str | None = None
    ) -> None:
        super().__init__(cluster, on_change, namespace)
        self._unseen: dict[JobKey, dict[str, float]] = {}  # name -> loop time created

    def created(self, key: JobKey, name: str) -> None:
        """Pod `name` of job `key` was just created (or found existing)."""
        if name not in self._objects.get(key, {}):
            self._unseen.setdefault(key, {})[name] = asyncio.get_running_loop().time()

    def unseen(self, key: JobKey) -> set[str]:
        """Pods of job `key` created by us that the watch has not brought yet."""
        names = self._unseen.get(key)
        if not names:
            return set()
        oldest = asyncio.get_running_loop().time() - self.EXPECTATION_SECONDS
        seen = self._objects.get(key, {})
        for name in [n for n, at in names.items() if n in seen or at < oldest]:
            del names[name]
        if not names:
            del self._unseen[key]
        return set(names)

    def pods_of(self, key: JobKey) -> list[dict[str, Any]]:
        return list(self._objects.get(key, {}).values())

    def all_pods(self) -> list[dict[str, Any]]:
        return [pod for pods in self._objects.values() for pod in pods.values()]

    def _list(self) -> Awaitable[tuple[list[dict[str, Any]], str]]:
        return self._cluster.list_pods(CHILD_SELECTOR, self._namespace)

    def _watch_from(self, rv: str) -> AsyncIterator[dict[str, Any]]:
        return self._cluster.watch_pods(CHILD_SELECTOR, rv, self._namespace)

    def trim(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return trim_pod(obj)


class ServiceInformer(ChildInformer):
    """The jobs' headless Services: a pass sees whether its job's Service exists without
    asking the API server, and a Service deleted by hand wakes its job."""

    kind = "service"

    def has_service(self, key: JobKey, owner_uid: str) -> bool:
        """Whether the Service of job `key` (with UID `owner_uid`) exists, as last seen."""
        return any(_owned_by(s, owner_uid) for s in self._objects.get(key, {}).values())

    def created(self, key: JobKey, service: Mapping[str, Any]) -> None:
        """The Service was just created (or found taken): count it as existing until the
        watch says otherwise, so the passes before its ADDED event do not create it again."""
        self._objects[key].setdefault(service["metadata"]["name"], self.trim(service))

    def _list(self) -> Awaitable[tuple[list[dict[str, Any]], str]]:
        return self._cluster.list_services(CHILD_SELECTOR, self._namespace)

    def _watch_from(self, rv: str) -> AsyncIterator[dict[str, Any]]:
        return self._cluster.watch_services(CHILD_SELECTOR, rv, self._namespace)

    def trim(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return trim_service(obj)


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref["uid"] == uid for ref in obj["metadata"].get("ownerReferences", []))


def _key(obj: Mapping[str, Any]) -> JobKey | None:
    meta = obj["metadata"]
    job = meta.get("labels", {}).get(LABEL_JOB_NAME)
    return (meta["namespace"], job) if job else None

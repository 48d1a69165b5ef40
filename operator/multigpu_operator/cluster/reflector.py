"""One list/watch loop (client-go's reflector) under every cache of the operator: the
jobs' pods and Services (informer.py), the nodes (nodes.py) and Kueue's objects
(workloads.py).

It lists once, then watches from the list's resourceVersion with bookmarks (a quiet
watch still moves its version on), starts a watch the server ends again from the last
version seen, relists on 410 Gone, and backs off a failed try (doubling to a cap, with
jitter). Objects are trimmed as they arrive (trim.py) and kept by a Store in the shape
its readers want. `health_age()` is the liveness probe's (handlers.py): a failed try
counts as progress, so an API server that is down keeps the probe healthy (a restart
would not bring it back) and only a stuck loop (a silent connection) ages.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from multigpu_operator.cluster.errors import ClusterError, Gone

log = logging.getLogger(__name__)

Lister = Callable[[], Awaitable[tuple[list[dict[str, Any]], str]]]
Watcher = Callable[[str], AsyncIterator[dict[str, Any]]]  # from a resourceVersion
Trim = Callable[[Mapping[str, Any]], dict[str, Any]]
# Told of a failed try: the error, the tries failed in a row, the seconds until the next.
# Returns whether to go on (False stops the reflector: a kind the server does not serve).
OnFailure = Callable[[ClusterError, int, float], bool]

FIRST_BACKOFF = 0.5


class Store(Protocol):
    """Where a reflector keeps its objects (trimmed)."""

    def replace(self, objects: list[dict[str, Any]]) -> None:
        """A complete list (the first, or after a relist): every object there is now."""
        ...

    def apply(self, event: str, obj: dict[str, Any]) -> None:
        """One watch event: ADDED, MODIFIED or DELETED, with the object."""
        ...


class Reflected:
    """A store that runs its own Reflector: what the controller starts and waits for."""

    reflector: Reflector

    @property
    def synced(self) -> asyncio.Event:
        return self.reflector.synced

    def run(self) -> Coroutine[Any, Any, None]:
        return self.reflector.run()

    def health_age(self) -> float:
        return self.reflector.health_age()


class Reflector:
    """Lists, then watches, one kind into a Store, until cancelled."""

    def __init__(
        self,
        kind: str,
        list_: Lister,
        watch: Watcher,
        trim: Trim,
        store: Store,
        backoff_cap: float = 30.0,
        on_failure: OnFailure | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self._list = list_
        self._watch = watch
        self._trim = trim
        self._store = store
        self._backoff_cap = backoff_cap
        self._on_failure = on_failure or self._warn
        # Not the loop's clock: the liveness probe reads health_age() from kopf's threads.
        self._clock = clock
        self.resource_version = ""  # the last one seen: where the next watch starts
        self.synced = asyncio.Event()  # set by the first complete list
        self._progress_at = self._clock()

    def health_age(self) -> float:
        """Seconds since the last event, list, watch end or failed try."""
        return self._clock() - self._progress_at

    async def run(self) -> None:
        """List and watch forever; a failed try backs off and relists."""
        backoff, failures = FIRST_BACKOFF, 0
        while True:
            try:
                await self.relist()
                backoff, failures = FIRST_BACKOFF, 0
                while True:
                    await self.watch()
            except Gone:
                log.info("%s watch expired; relisting", self.kind)
                continue
            except ClusterError as err:
                failures += 1
                if not self._on_failure(err, failures, backoff):
                    return
            except Exception:  # not cancellation: a BaseException
                failures += 1
                log.exception("%s watch failed; relisting in %.1fs", self.kind, backoff)
            # Jitter, up to a fifth more: replicas and watches that failed together (an API
            # server restarting) do not all come back at once.
            await asyncio.sleep(backoff * (1 + 0.2 * random.random()))
            backoff = min(backoff * 2, self._backoff_cap)
            self._progress_at = self._clock()

    async def relist(self) -> None:
        """One list, replacing what the store holds."""
        items, version = await self._list()
        self._store.replace([self._trim(obj) for obj in items])
        self.resource_version = version
        self.synced.set()
        self._progress_at = self._clock()

    async def watch(self) -> None:
        """One watch from the last resourceVersion seen, until the server ends it."""
        async for event in self._watch(self.resource_version):
            self._progress_at = self._clock()
            obj = event["object"]
            if event["type"] != "BOOKMARK":  # a bookmark carries only its version
                self._store.apply(event["type"], self._trim(obj))
            self.resource_version = obj["metadata"]["resourceVersion"]
        self._progress_at = self._clock()

    def _warn(self, err: ClusterError, failures: int, retry_in: float) -> bool:
        # The API server down, overloaded or refusing: its answer says it all.
        log.warning(
            "%s watch failed: HTTP %s: %s; relisting in %.1fs",
            self.kind,
            err.status,
            err.message,
            retry_in,
        )
        return True

"""The actuator's status write, and the Events that follow a successful one.

A status write is conditional on the job's resourceVersion (a conflict looks at the job
again soon, as the watch brings the newer version) and sent with strict field
validation: a field the CRD does not declare is refused, never dropped. Events are
posted only after the write succeeded, in the background. A pass whose status only
changes pod counts holds its write back (policy/steps/status.py `counts_held_for`); since when
one is held is remembered here and is the next pass's input. The written job is handed
back: the controller's cache takes it (controller/workers.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

from multigpu_operator import metrics
from multigpu_operator.api.status import Phase
from multigpu_operator.cluster.errors import (
    ClusterError,
    Conflict,
    NamespaceTerminating,
    NotFound,
)
from multigpu_operator.cluster.events import event_body
from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.cluster.kinds import EVENTS, JOBS
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.policy.kube.conditions import Event
from multigpu_operator.policy.step import StatusUpdate

log = logging.getLogger(__name__)

# A job whose status write lost a race is looked at again this soon (the watch usually
# brings the newer version first).
CONFLICT_RETRY_SECONDS = 1.0


class StatusWrites:
    def __init__(self, cluster: Cluster, wake: Callable[[JobKey, float], None]) -> None:
        self.cluster = cluster
        self._wake = wake
        self._background: set[asyncio.Task[None]] = set()
        self._counts_since: dict[JobKey, datetime] = {}  # when pod counts were first held

    def forget(self, key: JobKey) -> None:
        self._counts_since.pop(key, None)

    def counts_held_since(self, key: JobKey) -> datetime | None:
        """Since when a write of the job's pod counts has been held back (a pass's input)."""
        return self._counts_since.get(key)

    def hold(self, key: JobKey, now: datetime, seconds: float) -> None:
        """The pass held its write back for `seconds`: a timer writes it then, unless a
        write of something else takes the counts along first."""
        self._counts_since.setdefault(key, now)
        self._wake(key, seconds)

    async def stop(self) -> None:
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)  # keep a reference until done, or it may be collected
        task.add_done_callback(self._background.discard)

    async def _post_events(self, body: dict[str, Any], events: tuple[Event, ...]) -> None:
        """events.k8s.io Events on the job; failures are logged, never raised."""
        meta = body["metadata"]
        instance = os.environ.get("HOSTNAME", "multigpu-operator")
        for event in events:
            now = datetime.now(UTC)
            posted = event_body(body, event.type, event.reason, event.message, now, instance)
            try:
                await self.cluster.create(EVENTS, meta["namespace"], posted, read_back=False)
            except (NamespaceTerminating, NotFound) as err:
                # The namespace is going or gone, and the job with it: nobody reads it.
                log.debug("event %s on %s not posted: %s", event.reason, meta["name"], err.message)
            except ClusterError as err:
                log.warning(
                    "could not post event %s on %s: %s", event.reason, meta["name"], err.message
                )

    async def write(self, body: dict[str, Any], update: StatusUpdate) -> bool:
        """Write the status if it changed; False if the job changed meanwhile (the watch
        brings the newer version, which is reconciled instead). `body` becomes the job as
        written."""
        previous = body.get("status") or {}
        status = update.status.as_api()  # the one place a status becomes the API's JSON
        if status == previous:
            return True
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        patch = merge_patch(previous, status)
        try:
            updated = await self.cluster.patch(
                JOBS, *key, {"status": patch}, meta.get("resourceVersion"), "status"
            )
        except Conflict:
            self._wake(key, CONFLICT_RETRY_SECONDS)
            return False
        self._counts_since.pop(key, None)
        body["status"] = status
        body["metadata"] = {**meta, "resourceVersion": updated["metadata"]["resourceVersion"]}
        if update.events:
            # Events are informational: posting them must not hold up the next reconcile.
            self._spawn(self._post_events(dict(body), update.events))
        if update.entered is not None:
            before = Phase(previous["phase"]) if previous.get("phase") else None
            metrics.job_entered(body, before, update.entered)
        return True


def merge_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """`after` as a JSON merge patch over `before` (RFC 7386). A merge patch keeps the keys
    it does not mention, at any depth: the ones `after` dropped are sent as null (an ended
    job's progress drops its ETA)."""
    patch: dict[str, Any] = {k: None for k in before if k not in after}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            patch[key] = merge_patch(old, value)
        else:
            patch[key] = value
    return patch

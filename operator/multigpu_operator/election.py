"""Leader election: one replica reconciles, the others watch and wait, warm.

`acquire()` returns once this replica holds the Lease; `hold()` renews it and returns the
moment leadership is lost (someone else holds the Lease, or no renewal succeeded within
the renew deadline), so the caller stops reconciling before any other replica may start;
`release()` hands the Lease over on a graceful stop. `lead()` puts them together around
the controller's workers. The rules are in leadership.py; the Lease is read and written
through a LeaseStore (cluster/leases.py), so tests run the election against an in-memory
one on a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from multigpu_operator.cluster.errors import ClusterError
from multigpu_operator.leadership import LeaseRecord, LeaseTimings, may_take, released, taken

log = logging.getLogger(__name__)


class LeaseStore(Protocol):
    async def read(self) -> tuple[LeaseRecord | None, str | None]: ...

    async def write(self, record: LeaseRecord, resource_version: str | None) -> str: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        timings: LeaseTimings,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        timings.check()
        self.identity = identity
        self.timings = timings
        self.leading = False
        # Monotonic time of the last answer from the API server about the Lease: a
        # replica that cannot reach it is not ready (leader or standby).
        self.last_contact: float | None = None
        self._store = store
        self._monotonic = monotonic
        self._now = now
        self._sleep = sleep
        self._record: LeaseRecord | None = None
        self._version: str | None = None
        self._seen_since = 0.0  # when the record last changed, as this replica saw it

    async def acquire(self) -> None:
        """Return once this replica holds the Lease."""
        while not await self._try(self.timings.renew_deadline):
            await self._sleep(self.timings.retry_period)
        log.info("leading: holding Lease as %s", self.identity)

    async def hold(self) -> None:
        """Renew every retry period; return when leadership is lost."""
        renewed = self._monotonic()
        while True:
            await self._sleep(self.timings.retry_period)
            # An API server that does not answer must not keep a renewal waiting past the
            # deadline: the leader has to stop before anyone else may start.
            left = self.timings.renew_deadline - (self._monotonic() - renewed)
            if await self._try(max(left, 0.0)):
                renewed = self._monotonic()
                continue
            if self._record is not None and self._record.holder not in ("", self.identity):
                log.error("lost leadership: the Lease is held by %s", self._record.holder)
                break
            if self._monotonic() - renewed >= self.timings.renew_deadline:
                log.error("lost leadership: no renewal for %.0fs", self.timings.renew_deadline)
                break
        self.leading = False

    async def release(self) -> None:
        """Give the Lease up, if held, so a standby takes over at once."""
        if not self.leading or self._record is None:
            return
        self.leading = False
        try:
            await self._store.write(released(self._record, self._now()), self._version)
            log.info("released the Lease")
        except ClusterError as err:
            log.warning("could not release the Lease (%s); it expires on its own", err)

    def contact_age(self) -> float | None:
        """Seconds since the API server last answered about the Lease."""
        return None if self.last_contact is None else self._monotonic() - self.last_contact

    async def _try(self, give_up_after: float) -> bool:
        """One attempt to take or renew the Lease, given up after `give_up_after` seconds."""
        try:
            async with asyncio.timeout(give_up_after):
                return await self._attempt()
        except TimeoutError:
            log.warning("no answer about the Lease within %.1fs", give_up_after)
            return False

    async def _attempt(self) -> bool:
        try:
            record, version = await self._store.read()
        except ClusterError as err:
            log.warning("reading the Lease failed: %s", err)
            return False
        self.last_contact = self._monotonic()
        if version != self._version or version is None:
            self._record, self._version = record, version
            self._seen_since = self._monotonic()
        if not may_take(record, self.identity, self._seen_since, self._monotonic()):
            self.leading = False
            return False
        mine = taken(record, self.identity, self.timings, self._now())
        try:
            self._version = await self._store.write(mine, version)
        except ClusterError as err:
            # A Conflict: another replica wrote first; its record is read next time.
            log.info("taking the Lease failed: %s", err)
            return False
        self._record = mine
        self._seen_since = self.last_contact = self._monotonic()
        self.leading = True
        return True


async def lead(
    elector: LeaderElector,
    start_reconciling: Callable[[], None],
    stop_reconciling: Callable[[], Awaitable[None]],
) -> None:
    """Reconcile while this replica holds the Lease: wait for it, start, and stop again
    the moment it is lost, before another replica may take it. Returns once leadership
    was lost and reconciling has stopped; when cancelled (a graceful stop), reconciling
    stops too and the caller releases the Lease."""
    await elector.acquire()
    start_reconciling()
    try:
        await elector.hold()
    finally:
        await stop_reconciling()

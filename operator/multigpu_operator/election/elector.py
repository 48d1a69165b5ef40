"""Leader election: one replica reconciles, the others watch and wait, warm.

`acquire()` returns once this replica holds the Lease; `hold()` renews it and returns the
moment leadership is lost (someone else holds the Lease, or no renewal succeeded within
the renew deadline), so the caller stops reconciling before any other replica may start;
`release()` hands the Lease over on a graceful stop, giving up after RELEASE_SECONDS.
`lead()` puts them together around the controller's workers; a replica that lost the
Lease stops acting and runs for it again (`campaign()`), it never exits. An API server
that cannot be reached, times out or answers 429/5xx is a failed try like any other:
the standby tries again every retry period (with client-go's jitter), the leader until
its renew deadline. The rules are in lease_rules.py; the Lease is read and written
through a LeaseStore (cluster/leases.py), so tests run the election against an in-memory
one on a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol

from multigpu_operator.cluster.errors import ClusterError, Conflict
from multigpu_operator.election.lease_rules import (
    LeaseRecord,
    LeaseTimings,
    may_take,
    released,
    taken,
)
from multigpu_operator.policy.kube.timestamps import utc_now

log = logging.getLogger(__name__)

# A graceful stop hands the Lease over if the API server answers at once; otherwise the
# Lease expires on its own after its duration, and the exit is not held any longer.
RELEASE_SECONDS = 2.0
# client-go's JitterFactor: a standby waits 1 to 1.2 retry periods between tries, so that
# replicas started together do not keep colliding.
JITTER = 0.2


class LeaseStore(Protocol):
    async def read(self) -> tuple[LeaseRecord | None, str | None]: ...

    async def write(self, record: LeaseRecord, resource_version: str | None) -> str: ...


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
        jitter: Callable[[], float] = random.random,
    ) -> None:
        timings.check()
        self.identity = identity
        self.timings = timings
        self.leading = False
        # Monotonic time of the last answer from the API server about the Lease: a
        # replica that cannot reach it is not ready (leader or standby).
        self.last_contact: float | None = None
        # Monotonic time the loop last tried, answered or not: the liveness probe fails
        # only when this stops moving (a stuck loop), never for an API server that is down.
        self.last_try = monotonic()
        self._jitter = jitter
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
            await self._sleep(self.timings.retry_period * (1 + JITTER * self._jitter()))
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
        """Give the Lease up, if held, so a standby takes over at once; best effort, for
        at most RELEASE_SECONDS."""
        if not self.leading or self._record is None:
            return
        self.leading = False
        try:
            async with asyncio.timeout(RELEASE_SECONDS):
                if await self._release(self._record):
                    log.info("released the Lease")
        except (ClusterError, TimeoutError) as err:
            log.warning("could not release the Lease (%r); it expires on its own", err)

    async def _release(self, record: LeaseRecord) -> bool:
        """Write the released record; False when the Lease turned out not to be ours."""
        try:
            await self._store.write(released(record, self._now()), self._version)
            return True
        except Conflict:
            # A renewal cut short by the stop may have been written after all, so the
            # version we hold is stale: read the Lease again and release it if still ours.
            latest, version = await self._store.read()
            if latest is None or latest.holder != self.identity:
                log.info("the Lease is no longer ours: nothing to release")
                return False
            await self._store.write(released(latest, self._now()), version)
            return True

    def contact_age(self) -> float | None:
        """Seconds since the API server last answered about the Lease."""
        return None if self.last_contact is None else self._monotonic() - self.last_contact

    async def _try(self, give_up_after: float) -> bool:
        """One attempt to take or renew the Lease, given up after `give_up_after` seconds."""
        self.last_try = self._monotonic()
        try:
            async with asyncio.timeout(give_up_after):
                return await self._attempt()
        except TimeoutError:
            log.warning("no answer about the Lease within %.1fs", give_up_after)
            return False
        finally:
            self.last_try = self._monotonic()

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


async def campaign(
    elector: LeaderElector,
    start_reconciling: Callable[[], None],
    stop_reconciling: Callable[[], Awaitable[None]],
) -> None:
    """lead() again and again: a leader that lost the Lease (cut off from the API server
    past its renew deadline, or deposed) has stopped acting and runs for it again as a
    standby with warm caches; the process goes on. Returns only when cancelled."""
    while True:
        await lead(elector, start_reconciling, stop_reconciling)
        log.warning("stopped reconciling; running for the Lease again")

"""Leader election: client-go's rules (election/lease_rules.py) and the elector's loop
(election/elector.py) against an in-memory Lease on looptime's fake clock, so a lease
duration takes no time."""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from multigpu_operator.cluster.errors import ClusterError, Conflict, Unreachable
from multigpu_operator.election.elector import (
    JITTER,
    RELEASE_SECONDS,
    LeaderElector,
    campaign,
    lead,
)
from multigpu_operator.election.lease_rules import (
    LeaseRecord,
    LeaseTimings,
    may_take,
    released,
    taken,
)

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
TIMINGS = LeaseTimings(lease_duration=10, renew_deadline=7, retry_period=2)
HELD = LeaseRecord("a", 10, T0, T0, 3)


@pytest.mark.parametrize(
    ("record", "identity", "seen_since", "now", "allowed"),
    [
        pytest.param(None, "b", 0, 0, True, id="no-lease"),
        pytest.param(replace(HELD, holder=""), "b", 0, 0, True, id="released"),
        pytest.param(HELD, "a", 0, 0, True, id="own"),
        pytest.param(HELD, "b", 0, 9.9, False, id="held-and-fresh"),
        pytest.param(HELD, "b", 0, 10, True, id="not-renewed-for-its-duration"),
        pytest.param(HELD, "b", 5, 14, False, id="measured-from-when-seen"),
    ],
)
def test_may_take(
    record: LeaseRecord | None, identity: str, seen_since: float, now: float, allowed: bool
) -> None:
    assert may_take(record, identity, seen_since, now) is allowed


def test_taking_counts_transitions_and_renewing_keeps_the_acquire_time() -> None:
    later = T0 + timedelta(seconds=4)
    assert taken(None, "a", TIMINGS, T0) == LeaseRecord("a", 10, T0, T0, 0)
    assert taken(HELD, "b", TIMINGS, later) == LeaseRecord("b", 10, later, later, 4)
    assert taken(HELD, "a", TIMINGS, later) == replace(HELD, renew_time=later)
    assert released(HELD, later) == replace(
        HELD, holder="", lease_duration_seconds=1, renew_time=later
    )


@pytest.mark.parametrize(
    "timings",
    [LeaseTimings(10, 10, 2), LeaseTimings(10, 7, 6), LeaseTimings(10, 7, 0)],
    ids=["deadline-not-below-duration", "retry-too-slow", "no-retry"],
)
def test_timings_follow_client_go_constraints(timings: LeaseTimings) -> None:
    with pytest.raises(ValueError, match="lease duration > renew deadline"):
        timings.check()


class MemoryLease:
    """One Lease with resourceVersions, as the API server keeps it; `down` refuses calls."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.down: set[str] = set()

    def store(self, who: str) -> Store:
        return Store(self, who)


class Store:
    def __init__(self, lease: MemoryLease, who: str) -> None:
        self.lease, self.who = lease, who

    async def read(self) -> tuple[LeaseRecord | None, str | None]:
        if self.who in self.lease.down:
            raise ClusterError("connection refused")
        version = str(self.lease.version) if self.lease.record else None
        return self.lease.record, version

    async def write(self, record: LeaseRecord, resource_version: str | None) -> str:
        if self.who in self.lease.down:
            raise ClusterError("connection refused")
        current = str(self.lease.version) if self.lease.record else None
        if resource_version != current:
            raise Conflict("the object has been modified", 409)
        self.lease.record = record
        self.lease.version += 1
        return str(self.lease.version)


def elector(lease: MemoryLease, who: str) -> LeaderElector:
    """An elector on the loop's (fake) time. Its jitter is random as in production, but
    seeded by its name, so that every run of a test sees the same retry times."""
    loop = asyncio.get_running_loop()
    zero = loop.time()
    return LeaderElector(
        lease.store(who),
        who,
        TIMINGS,
        monotonic=loop.time,
        now=lambda: T0 + timedelta(seconds=loop.time() - zero),
        jitter=random.Random(who).random,
    )


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_one_leads_and_a_standby_takes_over_after_the_lease_duration() -> None:
    lease = MemoryLease()
    a, b = elector(lease, "a"), elector(lease, "b")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    waiting = asyncio.create_task(b.acquire())
    await asyncio.sleep(30)
    assert a.leading
    assert not b.leading
    assert not waiting.done()
    holding.cancel()  # "a" dies: no more renewals, no release
    start = asyncio.get_running_loop().time()
    await waiting
    took = asyncio.get_running_loop().time() - start
    assert b.leading
    assert lease.record is not None
    assert lease.record.holder == "b"
    # From the last renewal b saw: at most the lease duration plus one retry period.
    assert TIMINGS.lease_duration - TIMINGS.retry_period <= took <= 12


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_graceful_release_hands_over_at_the_next_try() -> None:
    lease = MemoryLease()
    a, b = elector(lease, "a"), elector(lease, "b")
    await a.acquire()
    waiting = asyncio.create_task(b.acquire())
    await asyncio.sleep(5)
    await a.release()
    start = asyncio.get_running_loop().time()
    await waiting
    # The standby's next try: one retry period with client-go's jitter at the most.
    assert asyncio.get_running_loop().time() - start <= TIMINGS.retry_period * (1 + JITTER)
    assert lease.record is not None
    assert lease.record.transitions == 1


@pytest.mark.asyncio
@pytest.mark.looptime
@pytest.mark.parametrize(("holder", "released"), [("a", True), ("b", False)])
async def test_a_release_after_a_renewal_it_never_saw_answered_reads_the_lease_again(
    holder: str, released: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # A stop cuts a renewal short after the server wrote it: the version a holds is stale.
    lease = MemoryLease()
    a = elector(lease, "a")
    await a.acquire()
    assert lease.record is not None
    behind = replace(lease.record, holder=holder)
    await lease.store("other").write(behind, str(lease.version))
    await a.release()
    assert lease.record is not None
    assert lease.record.holder == ("" if released else "b")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_leader_cut_off_stops_before_anyone_else_may_start() -> None:
    lease = MemoryLease()
    a, b = elector(lease, "a"), elector(lease, "b")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await asyncio.sleep(3)
    lease.down.add("a")  # a cannot reach the API server any more
    cut = asyncio.get_running_loop().time()
    waiting = asyncio.create_task(b.acquire())
    await holding  # hold() returns: leadership lost
    stopped = asyncio.get_running_loop().time()
    assert not a.leading
    await waiting
    started = asyncio.get_running_loop().time()
    assert stopped - cut <= TIMINGS.renew_deadline
    assert stopped < started  # never two leaders
    age = a.contact_age()
    assert age is not None
    assert age >= stopped - cut


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_leader_that_sees_another_holder_stops_at_once() -> None:
    lease = MemoryLease()
    a = elector(lease, "a")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    assert lease.record is not None
    lease.record = replace(lease.record, holder="intruder")
    lease.version += 1
    await asyncio.wait_for(holding, timeout=TIMINGS.retry_period + 0.1)
    assert not a.leading


class HungLease(MemoryLease):
    """An API server that stops answering: reads wait while `answering` is clear."""

    def __init__(self) -> None:
        super().__init__()
        self.answering = asyncio.Event()
        self.answering.set()

    def store(self, who: str) -> Store:
        return HungStore(self, who)


class HungStore(Store):
    lease: HungLease

    async def read(self) -> tuple[LeaseRecord | None, str | None]:
        await self.lease.answering.wait()
        return await super().read()


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_renewal_without_answer_still_ends_leadership_by_the_renew_deadline() -> None:
    lease = HungLease()
    a = elector(lease, "a")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await asyncio.sleep(3)
    lease.answering.clear()
    hung = asyncio.get_running_loop().time()
    await holding
    assert not a.leading
    assert asyncio.get_running_loop().time() - hung <= TIMINGS.renew_deadline


class Workers:
    """What lead() starts and stops, with the loop time of each."""

    def __init__(self) -> None:
        self.log: list[tuple[str, float]] = []

    def start(self) -> None:
        self.log.append(("start", asyncio.get_running_loop().time()))

    async def stop(self) -> None:
        await asyncio.sleep(0.1)  # cancelling the workers takes a moment
        self.log.append(("stop", asyncio.get_running_loop().time()))


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_lead_reconciles_only_while_holding_and_stops_before_the_next_leader() -> None:
    lease = MemoryLease()
    a, b = elector(lease, "a"), elector(lease, "b")
    workers_a, workers_b = Workers(), Workers()
    leading_a = asyncio.create_task(lead(a, workers_a.start, workers_a.stop))
    await asyncio.sleep(1)
    leading_b = asyncio.create_task(lead(b, workers_b.start, workers_b.stop))
    await asyncio.sleep(20)
    assert [what for what, _ in workers_a.log] == ["start"]
    assert workers_b.log == []  # a standby: caches only
    lease.down.add("a")  # a is cut off from the API server
    await leading_a  # returns: leadership lost, workers stopped
    (_, a_stopped) = workers_a.log[-1]
    await asyncio.sleep(15)
    assert [what for what, _ in workers_b.log] == ["start"]
    (_, b_started) = workers_b.log[0]
    assert a_stopped < b_started
    leading_b.cancel()  # a graceful stop: the workers stop too
    with pytest.raises(asyncio.CancelledError):
        await leading_b
    assert [what for what, _ in workers_b.log] == ["start", "stop"]


class FlakyLease(MemoryLease):
    """An API server that is restarted: while `down`, calls fail as the client sees a
    refused connection (Unreachable) or a 503, by `failure`."""

    failure: ClusterError = Unreachable("ClientConnectorError: connection refused")

    def store(self, who: str) -> Store:
        return FlakyStore(self, who)


class FlakyStore(Store):
    lease: FlakyLease

    async def read(self) -> tuple[LeaseRecord | None, str | None]:
        if self.lease.down:
            raise self.lease.failure
        return await super().read()


@pytest.mark.asyncio
@pytest.mark.looptime
@pytest.mark.parametrize(
    "failure",
    [Unreachable("ClientConnectorError: refused"), ClusterError("unavailable", 503)],
    ids=["refused", "503"],
)
async def test_an_outage_past_the_renew_deadline_stops_the_leader_who_then_runs_again(
    failure: ClusterError,
) -> None:
    lease = FlakyLease()
    lease.failure = failure
    a, b = elector(lease, "a"), elector(lease, "b")
    workers_a, workers_b = Workers(), Workers()
    running_a = asyncio.create_task(campaign(a, workers_a.start, workers_a.stop))
    await asyncio.sleep(1)
    running_b = asyncio.create_task(campaign(b, workers_b.start, workers_b.stop))
    await asyncio.sleep(5)
    assert [what for what, _ in workers_a.log] == ["start"]
    lease.down.update({"a", "b"})  # the API server goes away for both, for 30 s
    cut = asyncio.get_running_loop().time()
    await asyncio.sleep(30)
    # The leader stopped acting within the renew deadline (of its last renewal, at most
    # one retry period before the cut) and is a candidate again; nobody else led.
    assert [what for what, _ in workers_a.log] == ["start", "stop"]
    assert workers_a.log[1][1] - cut <= TIMINGS.renew_deadline
    assert workers_b.log == []
    assert not running_a.done()  # no exit: both still run
    assert not running_b.done()
    lease.down.clear()
    back = asyncio.get_running_loop().time()
    await asyncio.sleep(TIMINGS.lease_duration)
    starts = [at for log in (workers_a.log, workers_b.log) for what, at in log if at > back]
    assert len(starts) == 1  # exactly one leads again, within the lease duration
    assert a.leading != b.leading
    running_a.cancel()
    running_b.cancel()
    await asyncio.gather(running_a, running_b, return_exceptions=True)


class StuckWrites(MemoryLease):
    """An API server that accepts the connection and never answers a write."""

    def store(self, who: str) -> Store:
        return StuckStore(self, who)


class StuckStore(Store):
    async def write(self, record: LeaseRecord, resource_version: str | None) -> str:
        if self.lease.record is not None:  # the first write (taking the Lease) passes
            await asyncio.Event().wait()
        return await super().write(record, resource_version)


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_releasing_against_an_api_server_that_does_not_answer_gives_up_in_2s() -> None:
    lease = StuckWrites()
    a = elector(lease, "a")
    await a.acquire()
    start = asyncio.get_running_loop().time()
    await asyncio.wait_for(a.release(), timeout=RELEASE_SECONDS + 1)
    assert asyncio.get_running_loop().time() - start == pytest.approx(RELEASE_SECONDS)
    assert not a.leading
    assert lease.record is not None
    assert lease.record.holder == "a"  # not released: it expires on its own


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_the_loop_keeps_trying_while_the_api_server_is_down() -> None:
    lease = FlakyLease()
    lease.down.add("a")
    a = elector(lease, "a")
    trying = asyncio.create_task(a.acquire())
    for _ in range(10):
        await asyncio.sleep(TIMINGS.retry_period * 1.2 + 0.01)
        assert asyncio.get_running_loop().time() - a.last_try <= TIMINGS.retry_period * 1.2
    assert a.contact_age() is None  # never answered, yet never stuck
    lease.down.clear()
    await asyncio.wait_for(trying, timeout=TIMINGS.retry_period * 1.2 + 0.01)
    assert a.leading

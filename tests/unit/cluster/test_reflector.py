"""The list/watch loop (cluster/reflector.py) against a scripted API server: what it
lists, where each watch starts, what reaches its store, how long it waits after a
failure and how old its health gets. On looptime's fast-forwarding loop: minutes of
backoff take no real time."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from multigpu_operator.cluster.errors import ClusterError, Forbidden, Gone, Unreachable
from multigpu_operator.cluster.reflector import Reflector

Event = dict[str, Any]
# A list answer: (items, resourceVersion), or what the request raises.
ListAnswer = tuple[list[dict[str, Any]], str] | Exception
# A watch: its events (a number is a pause of that many seconds), then how it ends: None
# when the server ends it, an error, or "hang" for a connection that stays silent.
Watch = tuple[list[Event | float], Exception | str | None]

UNAVAILABLE = ClusterError("the server is currently unable to handle the request", 503)


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"large": "x" * 100}}


def added(name: str, rv: str) -> Event:
    return {"type": "ADDED", "object": obj(name, rv)}


def deleted(name: str, rv: str) -> Event:
    return {"type": "DELETED", "object": obj(name, rv)}


def bookmark(rv: str) -> Event:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": rv}}}


def trim(o: Any) -> dict[str, Any]:
    return {"metadata": {"name": o["metadata"]["name"]}}


@dataclass
class ScriptedServer:
    """Answers lists and watches from a script; past its end, requests never answer."""

    lists: list[ListAnswer]
    watches: list[Watch] = field(default_factory=list)
    listed_at: list[float] = field(default_factory=list)
    watched_from: list[str] = field(default_factory=list)

    async def list(self) -> tuple[list[dict[str, Any]], str]:
        self.listed_at.append(asyncio.get_running_loop().time())
        if not self.lists:
            await asyncio.Event().wait()
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def watch(self, resource_version: str) -> AsyncIterator[Event]:
        self.watched_from.append(resource_version)
        events, end = self.watches.pop(0) if self.watches else ([], "hang")
        for event in events:
            if isinstance(event, float):
                await asyncio.sleep(event)
            else:
                yield event
        if end == "hang":
            await asyncio.Event().wait()
        if isinstance(end, Exception):
            raise end


@dataclass
class RecordingStore:
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    lists: int = 0

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self.lists += 1
        self.objects = {o["metadata"]["name"]: o for o in objects}

    def apply(self, event: str, obj: dict[str, Any]) -> None:
        assert event in ("ADDED", "MODIFIED", "DELETED")
        if event == "DELETED":
            del self.objects[obj["metadata"]["name"]]
        else:
            self.objects[obj["metadata"]["name"]] = obj


def reflector(server: ScriptedServer, store: RecordingStore, cap: float = 30.0) -> Reflector:
    return Reflector(
        "thing",
        server.list,
        server.watch,
        trim,
        store,
        backoff_cap=cap,
        clock=asyncio.get_running_loop().time,
    )


async def run_for(r: Reflector, seconds: float) -> None:
    task = asyncio.create_task(r.run())
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@dataclass(frozen=True)
class Case:
    id: str
    server: ScriptedServer
    watched_from: list[str]
    objects: set[str]
    # Seconds between one list and the next: each a backoff, jitter up to a fifth more.
    waits: list[float]
    cap: float = 30.0


CASES = [
    Case(
        "a-bookmark-moves-the-version-on",
        ScriptedServer([([obj("a", "3")], "3")], [([added("b", "4"), bookmark("9")], None)]),
        watched_from=["3", "9"],
        objects={"a", "b"},
        waits=[],
    ),
    Case(
        "a-watch-the-server-ends-starts-again-from-its-last-event-without-listing",
        ScriptedServer(
            [([], "1")],
            [([added("a", "2"), added("b", "3"), deleted("a", "5")], None), ([], None)],
        ),
        watched_from=["1", "5", "5"],
        objects={"b"},
        waits=[],
    ),
    Case(
        "410-gone-relists-at-once-and-the-list-replaces-the-store",
        ScriptedServer(
            [([obj("a", "1")], "1"), ([obj("b", "7")], "7")],
            [([added("c", "2")], Gone("too old resource version: 1", 410))],
        ),
        watched_from=["1", "7"],
        objects={"b"},
        waits=[0],
    ),
    Case(
        "failed-lists-back-off-doubling",
        ScriptedServer([UNAVAILABLE, Unreachable("connection refused"), UNAVAILABLE, ([], "1")]),
        watched_from=["1"],
        objects=set(),
        waits=[0.5, 1, 2],
    ),
    Case(
        "the-backoff-stops-growing-at-its-cap",
        ScriptedServer([UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, ([], "1")]),
        watched_from=["1"],
        objects=set(),
        waits=[0.5, 1, 1, 1],
        cap=1,
    ),
    Case(
        "a-failed-watch-backs-off-and-relists",
        ScriptedServer([([obj("a", "1")], "1"), ([], "4")], [([], UNAVAILABLE)]),
        watched_from=["1", "4"],
        objects=set(),
        waits=[0.5],
    ),
    Case(
        "an-unexpected-error-backs-off-too",
        ScriptedServer([RuntimeError("bug"), ([obj("a", "1")], "1")]),
        watched_from=["1"],
        objects={"a"},
        waits=[0.5],
    ),
    Case(
        "a-good-list-starts-the-backoff-over",
        ScriptedServer([UNAVAILABLE, UNAVAILABLE, ([], "1"), ([], "2")], [([], UNAVAILABLE)]),
        watched_from=["1", "2"],
        objects=set(),
        waits=[0.5, 1, 0.5],
    ),
]


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_list_and_watch(case: Case) -> None:
    store = RecordingStore()
    r = reflector(case.server, store, case.cap)
    await run_for(r, 60)
    assert case.server.watched_from == case.watched_from
    assert set(store.objects) == case.objects
    assert all(o == trim(o) for o in store.objects.values())  # trimmed on arrival
    assert r.synced.is_set()
    times = case.server.listed_at
    waits = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert len(waits) == len(case.waits)
    for waited, backoff in zip(waits, case.waits, strict=True):
        assert backoff <= waited <= backoff * 1.2


@dataclass(frozen=True)
class HealthCase:
    id: str
    server: ScriptedServer
    after: float
    youngest: float
    oldest: float


HEALTH = [
    HealthCase(
        "an-api-server-that-is-down-keeps-it-young-each-failed-try-counts",
        ScriptedServer([UNAVAILABLE] * 100),
        after=600,
        youngest=0,
        oldest=30 * 1.2,
    ),
    HealthCase(
        "events-keep-it-young",
        ScriptedServer(
            [([], "1")], [([added(f"p{i}", str(i + 2)), 10.0], None) for i in range(100)]
        ),
        after=600,
        youngest=0,
        oldest=10,
    ),
    HealthCase(
        "a-silent-connection-ages-it",
        ScriptedServer([([], "1")], [([added("a", "2")], "hang")]),
        after=600,
        youngest=600,
        oldest=600,
    ),
]


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
@pytest.mark.parametrize("case", HEALTH, ids=[c.id for c in HEALTH])
async def test_health_age(case: HealthCase) -> None:
    r = reflector(case.server, RecordingStore())
    task = asyncio.create_task(r.run())
    await asyncio.sleep(case.after)
    age = r.health_age()
    task.cancel()
    assert case.youngest <= age <= case.oldest


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
async def test_a_failure_handler_that_gives_up_ends_the_loop_unsynced() -> None:
    told: list[tuple[int, float]] = []

    def give_up_on_the_third(err: ClusterError, failures: int, retry_in: float) -> bool:
        told.append((failures, retry_in))
        return failures < 3

    server = ScriptedServer([Forbidden("denied", 403)] * 5)
    r = Reflector(
        "thing", server.list, server.watch, trim, RecordingStore(), 30, give_up_on_the_third
    )
    await asyncio.wait_for(r.run(), 60)
    assert told == [(1, 0.5), (2, 1), (3, 2)]
    assert len(server.listed_at) == 3
    assert not r.synced.is_set()

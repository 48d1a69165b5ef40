"""The controller's work queue: de-duplication, keys re-added while being worked on,
timers and failure backoff, on looptime's fake loop clock (no real waiting)."""

from __future__ import annotations

import asyncio

import pytest
from looptime import LoopTimeProxy

from multigpu_operator.controller.workqueue import Backoff, WorkQueue

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]


def new_queue(base: float = 2, cap: float = 60) -> WorkQueue[str]:
    return WorkQueue(Backoff(base, cap))


async def drain(queue: WorkQueue[str]) -> list[str]:
    """Every key waiting now, each marked done at once."""
    keys = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        keys.append(key)
    return keys


async def test_a_key_waits_in_the_queue_once_however_often_it_is_added() -> None:
    queue = new_queue()
    for key in ["a", "b", "a", "a", "b", "c"]:
        queue.add(key)
    assert await drain(queue) == ["a", "b", "c"]


async def test_a_key_added_while_worked_on_comes_back_once_after_done() -> None:
    queue = new_queue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # never handed to a second worker meanwhile
    queue.done(key)
    assert await drain(queue) == ["a"]
    assert await drain(queue) == []


async def test_two_workers_never_hold_the_same_key() -> None:
    queue = new_queue()
    holding: list[str] = []
    overlaps: list[str] = []

    async def worker() -> None:
        while True:
            key = await queue.get()
            if key in holding:
                overlaps.append(key)
            holding.append(key)
            await asyncio.sleep(1)  # a reconcile taking a second, adds arriving meanwhile
            holding.remove(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(2)]
    for _ in range(10):
        queue.add("a")
        queue.add("b")
        await asyncio.sleep(0.3)
    await asyncio.sleep(5)
    for task in workers:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    assert overlaps == []
    assert len(queue) == 0


async def test_the_earliest_timer_of_a_key_wins(looptime: LoopTimeProxy) -> None:
    queue = new_queue()
    queue.add_after("a", 10)
    queue.add_after("a", 5)
    queue.add_after("a", 20)
    assert queue.due("a") == looptime + 5
    await asyncio.sleep(4.9)
    assert len(queue) == 0
    await asyncio.sleep(0.2)
    assert await drain(queue) == ["a"]
    await asyncio.sleep(30)
    assert await drain(queue) == []  # the later timers were replaced, not kept


async def test_a_timer_adds_a_key_being_worked_on_once_the_work_is_done() -> None:
    queue = new_queue()
    queue.add("a")
    key = await queue.get()
    queue.add_after("a", 1)
    await asyncio.sleep(2)
    assert len(queue) == 0
    queue.done(key)
    assert await drain(queue) == ["a"]


async def test_discard_cancels_the_timer_of_a_deleted_key() -> None:
    queue = new_queue()
    queue.add_after("a", 5)
    queue.add_after("b", 5)
    queue.discard("a")
    assert queue.due("a") is None
    await asyncio.sleep(10)
    assert await drain(queue) == ["b"]


async def test_failures_back_off_exponentially_up_to_the_cap_and_reset_on_success(
    looptime: LoopTimeProxy,
) -> None:
    queue = new_queue(base=2, cap=20)
    delays = []
    for _ in range(6):
        delays.append(queue.retry("a"))
        assert queue.due("a") == looptime + delays[-1]
        await asyncio.sleep(delays[-1])
        assert await drain(queue) == ["a"]
    assert delays == [2, 4, 8, 16, 20, 20]
    queue.forget("a")  # a pass succeeded
    assert queue.retry("a") == 2


async def test_backoff_is_per_key_and_ends_with_the_key() -> None:
    queue = new_queue(base=1, cap=60)
    assert [queue.retry("a") for _ in range(3)] == [1, 2, 4]
    assert queue.retry("b") == 1
    queue.discard("a")
    assert queue.retry("a") == 1


async def test_a_retry_never_postpones_an_earlier_timer(looptime: LoopTimeProxy) -> None:
    queue = new_queue(base=30, cap=60)
    queue.add_after("a", 5)  # e.g. a deadline due in 5 s
    assert queue.retry("a") == 30
    assert queue.due("a") == looptime + 5


async def test_each_hand_out_tells_how_long_the_key_waited() -> None:
    waits: list[float] = []
    queue: WorkQueue[str] = WorkQueue(Backoff(2, 60), waits.append)
    queue.add("a")
    queue.add("a")  # still the first add's wait: the key was queued then
    queue.add("b")
    await drain(queue)
    assert len(waits) == 2
    assert all(w >= 0 for w in waits)

"""A de-duplicating work queue of keys, with per-key timers and failure backoff.

The shape of client-go's workqueue, which controllers in the field share:
- a key waits in the queue at most once, however often it is added;
- a key handed out by get() is not handed out again before done(); an add meanwhile
  makes it come back once after, so the change that caused the add is seen;
- add_after() adds a key later; one timer per key, the earliest wins;
- retry() adds a failed key after an exponential backoff, which forget() resets.

Timers run on the event loop's time (loop.time, call_at): tests fast-forward it. How
long a key waited to be handed out is told to `on_wait` (a metric) in real seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Backoff:
    """Delay before the n-th retry of a key in a row: base, 2 base, 4 base, ... up to cap."""

    base: float
    cap: float

    def delay(self, failures: int) -> float:
        return min(self.cap, self.base * 2.0 ** min(max(failures - 1, 0), 62))


class WorkQueue(Generic[K]):
    def __init__(
        self, backoff: Backoff, on_wait: Callable[[float], None] = lambda seconds: None
    ) -> None:
        self._backoff = backoff
        self._on_wait = on_wait
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: dict[K, float] = {}  # key -> when it was queued (perf_counter)
        self._active: set[K] = set()
        self._dirty: set[K] = set()  # added while active: hand out again after done()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._failures: dict[K, int] = {}

    def __len__(self) -> int:
        """Keys waiting to be handed out."""
        return len(self._queued)

    def active(self) -> int:
        """Keys handed out and not done yet."""
        return len(self._active)

    def add(self, key: K) -> None:
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued[key] = time.perf_counter()
            self._queue.put_nowait(key)

    async def get(self) -> K:
        """The next key; the caller owns it until done(key)."""
        key = await self._queue.get()
        self._on_wait(time.perf_counter() - self._queued.pop(key))
        self._active.add(key)
        return key

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` in `delay` seconds, unless its timer is due sooner already."""
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None and timer.when() <= due:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def due(self, key: K) -> float | None:
        """The loop time at which `key`'s timer fires, if it has one."""
        timer = self._timers.get(key)
        return timer.when() if timer is not None else None

    def retry(self, key: K) -> float:
        """Add a key whose work failed after its backoff; returns the delay."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = self._backoff.delay(failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """The key's work succeeded: its next failure starts the backoff anew."""
        self._failures.pop(key, None)

    def discard(self, key: K) -> None:
        """The key is gone: cancel its timer and forget its failures. (A copy already
        waiting in the queue is still handed out; the worker finds nothing to do.)"""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._failures.pop(key, None)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

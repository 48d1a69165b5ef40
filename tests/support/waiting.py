"""Polling helpers: the control plane is asynchronous, tests wait for states."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], what: str, timeout: float = 30, interval: float = 0.2
) -> T:
    """Call `probe` until it returns a truthy value; fail naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")

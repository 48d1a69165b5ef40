"""Plain progress lines for the long steps of `make images` and `make demo` (builds, pushes,
pulls, training): one line every few seconds, no terminal tricks, since CI logs them."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def size(n: float) -> str:
    """Bytes the way the lines show them: 850 MB, 5.9 GB."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def bytes_under(root: Path) -> int:
    """Bytes of the files under `root` (a push's or a pull's progress is its growth)."""
    total = 0
    for path in root.rglob("*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except OSError:
            continue  # a download that finished and moved between listing and stat
    return total


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def ticking(
    what: str, status: Callable[[], str] | None = None, every: float = 10
) -> Iterator[None]:
    """While the block runs, print `what: <status>, N s` every `every` seconds (the first
    after `every`: a quick step prints only its last line); then `what: done in N s`.
    `status` runs on a thread of its own and must not raise (its failures read "?")."""
    start = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every):
            try:
                now = status() if status else ""
            except Exception:  # a status that cannot be read is no reason to stop the step
                now = "?"
            say(f"{what}: {now + ', ' if now else ''}{time.monotonic() - start:.0f} s")

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    outcome = "failed after"
    try:
        yield
        outcome = "done in"
    finally:
        stop.set()
        thread.join()
        say(f"{what}: {outcome} {time.monotonic() - start:.0f} s")

"""Sampling the operator with py-spy while the benchmark runs, and the top of the result.

py-spy (a dev dependency) samples the running process from outside, without changing
its code. `--format raw` writes collapsed stacks, one line per distinct stack with its
sample count; the top lists the functions by samples spent in them (self) and under them
(total), as `py-spy top` would, but over the whole run.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

# Without pausing the operator (--nonblocking), 50 samples a second, collapsed stacks.
RECORD = ("record", "--nonblocking", "-r", "50", "--format", "raw")


class Sampler:
    """py-spy record on `pid` until stop(); the collapsed stacks land in `path`."""

    def __init__(self, pid: int, path: Path) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.path = path
        self._proc = subprocess.Popen(
            [spy, *RECORD, "-o", str(path), "-p", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        self._proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        self._proc.wait(timeout=60)


def top(path: Path, entries: int = 15) -> list[str]:
    """The functions with the most samples: own (leaf) and total (anywhere on the stack)."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";")]
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    lines = [f"{samples} samples; own% total% function (file:line)"]
    for frame, count in own.most_common(entries):
        lines.append(f"{100 * count / samples:5.1f} {100 * total[frame] / samples:6.1f}  {frame}")
    return lines


def _short(frame: str) -> str:
    """`func (path/to/module.py:12)` -> `func (module.py)`: lines differ per sample."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1].rstrip(")")
    return f"{name} ({file})"

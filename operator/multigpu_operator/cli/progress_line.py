"""What `mgj wait` and `mgj logs --follow` show while a job runs.

On a terminal, one status line rewritten in place (carriage return, erase line) with the
phase, the progress when the trainer reports it and the time waited, which ticks on
while nothing else changes; other output (log lines) is written above it. Piped, a plain
line each time the status changes and nothing else, so a log file or CI output reads as
a history, without escape codes or a line per poll.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import TextIO

ERASE = "\r\033[K"


def elapsed(seconds: float) -> str:
    """E.g. "8s", "3m05s", "1h02m"."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except ValueError:  # closed
        return False


class StatusLine:
    """A job's status on `out`: live on a terminal, a line per change when piped."""

    def __init__(
        self,
        out: TextIO,
        clock: Callable[[], float] = time.monotonic,
        width: Callable[[], int] = lambda: shutil.get_terminal_size().columns,
    ) -> None:
        self.out = out
        self.tty = is_terminal(out)
        self._clock = clock
        self._width = width
        self._start = clock()
        self._text = ""
        self._drawn = False

    def show(self, text: str) -> None:
        """On a terminal: `text` and the time waited, in place; piped: `text` as a line
        if it differs from the last one."""
        changed = text != self._text
        self._text = text
        if self.tty:
            self._draw()
        elif changed:
            self.out.write(f"{text}\n")
            self.out.flush()

    def clear(self) -> None:
        """Erase the live line before other output goes to the same terminal."""
        if self._drawn:
            self.out.write(ERASE)
            self.out.flush()
            self._drawn = False

    def redraw(self) -> None:
        if self.tty and self._text:
            self._draw()

    def end(self) -> None:
        """Leave the last status on screen and move below it."""
        if self._drawn:
            self.out.write("\n")
            self.out.flush()
            self._drawn = False

    def _draw(self) -> None:
        line = f"{self._text}, waited {elapsed(self._clock() - self._start)}"
        # A line wider than the terminal wraps, and the carriage return would then
        # rewrite only its last row: cut it to fit.
        limit = max(self._width() - 1, 20)
        if len(line) > limit:
            line = line[: limit - 3] + "..."
        self.out.write(ERASE + line)
        self.out.flush()
        self._drawn = True


class Above:
    """A text stream whose writes appear above a live status line on the same terminal:
    the line is erased, the text written, and the line drawn again."""

    def __init__(self, out: TextIO, status: StatusLine) -> None:
        self._out = out
        self._status = status

    def write(self, text: str) -> int:
        self._status.clear()
        written = self._out.write(text)
        self._out.flush()
        self._status.redraw()
        return written

    def writelines(self, lines: list[str]) -> None:
        self.write("".join(lines))

    def flush(self) -> None:
        self._out.flush()

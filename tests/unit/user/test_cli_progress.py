"""What `mgj wait` and `mgj logs --follow` show while a job runs (cli/progress_line.py): a live
line on a terminal, a line per change when piped."""

from __future__ import annotations

import io

import pytest

from multigpu_operator.cli.progress_line import ERASE, Above, StatusLine, elapsed


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (8.9, "8s"), (65, "1m05s"), (3599, "59m59s"), (3720, "1h02m"), (-1, "0s")],
)
def test_elapsed(seconds: float, text: str) -> None:
    assert elapsed(seconds) == text


def test_piped_a_line_per_change_and_nothing_else() -> None:
    out = io.StringIO()
    status = StatusLine(out)
    for text in ("train: Pending", "train: Pending", "train: Running", "train: Running"):
        status.show(text)
    status.end()
    assert out.getvalue() == "train: Pending\ntrain: Running\n"


def test_on_a_terminal_one_line_rewritten_with_the_time_waited() -> None:
    out, clock = Terminal(), Clock()
    status = StatusLine(out, clock, width=lambda: 80)
    status.show("train: Pending")
    clock.now += 65
    status.show("train: Pending")  # nothing changed but the time
    clock.now += 2
    status.show("train: Running, 41% (step 1200 of 2876)")
    status.end()
    assert out.getvalue() == (
        f"{ERASE}train: Pending, waited 0s"
        f"{ERASE}train: Pending, waited 1m05s"
        f"{ERASE}train: Running, 41% (step 1200 of 2876), waited 1m07s\n"
    )


def test_a_line_wider_than_the_terminal_is_cut_so_that_it_does_not_wrap() -> None:
    out = Terminal()
    StatusLine(out, Clock(), width=lambda: 30).show("train: Running, " + "x" * 50)
    shown = out.getvalue().removeprefix(ERASE)
    assert len(shown) == 29
    assert shown.endswith("...")


def test_log_lines_go_above_the_live_line() -> None:
    terminal = Terminal()  # stdout and stderr on one terminal
    status = StatusLine(terminal, Clock(), width=lambda: 80)
    logs = Above(terminal, status)
    logs.write("[train-0 r0] step 1\n")  # before any status: nothing to erase
    status.show("train: Running")
    logs.writelines(["[train-0 r0] step 2\n", "[train-1 r1] step 2\n"])
    status.end()
    assert terminal.getvalue() == (
        "[train-0 r0] step 1\n"
        f"{ERASE}train: Running, waited 0s"
        f"{ERASE}[train-0 r0] step 2\n[train-1 r1] step 2\n"
        f"{ERASE}train: Running, waited 0s\n"
    )

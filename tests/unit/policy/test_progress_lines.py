"""The progress lines of the long local-cluster steps (tests/cluster/progress.py): plain
lines at a steady pace while a step runs, and one that says how it ended."""

from __future__ import annotations

import time

import pytest

from cluster.progress import size, ticking


def test_a_long_step_prints_its_status_while_it_runs_and_how_long_it_took(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ticking("pushing x", lambda: "1.2 GB written of 5.9 GB", every=0.05):
        time.sleep(0.18)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 3
    assert all(line.startswith("pushing x: 1.2 GB written of 5.9 GB, ") for line in lines[:-1])
    assert lines[-1].startswith("pushing x: done in ")
    assert all("\r" not in line and "\x1b" not in line for line in lines)


def test_a_quick_step_prints_one_line_and_a_failed_one_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ticking("quick"):
        pass
    with pytest.raises(RuntimeError), ticking("broken", every=10):
        raise RuntimeError("no")
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["quick: done in 0 s", "broken: failed after 0 s"]


def test_a_status_that_fails_reads_as_a_question_mark(capsys: pytest.CaptureFixture[str]) -> None:
    def status() -> str:
        raise OSError("gone")

    with ticking("pulling", status, every=0.05):
        time.sleep(0.08)
    assert capsys.readouterr().err.splitlines()[0].startswith("pulling: ?, ")


def test_sizes_read_as_mb_or_gb() -> None:
    assert (size(850e6), size(5.9e9)) == ("850 MB", "5.9 GB")

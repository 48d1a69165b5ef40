"""The operator's files stay small enough to read in one sitting: 300 lines at most.

A file that grows past it is a sign that it does two things; split it by what each part
is (docs/architecture.md), not by line numbers.
"""

from __future__ import annotations

from pathlib import Path

OPERATOR = Path(__file__).resolve().parents[3] / "operator" / "multigpu_operator"
MAX_LINES = 300


def test_every_operator_file_is_at_most_300_lines() -> None:
    sizes = {
        path.relative_to(OPERATOR).as_posix(): len(path.read_text().splitlines())
        for path in sorted(OPERATOR.rglob("*.py"))
    }
    assert len(sizes) > 50, "the operator's sources were not found"
    too_long = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_long, f"files over {MAX_LINES} lines: {too_long}"

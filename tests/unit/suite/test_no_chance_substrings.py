"""No test looks for a bare number in free text: `"403" not in log` failed a green run
because a log line's timestamp ended in ,403. Numbers are matched in a field that holds
them (an HTTP status, a parsed metric, a structured log line), or with the words around
them; this scan over tests/ keeps the pattern from coming back."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
# A literal with a digit and no letter: "403", "1.0", ":29500", "2/".
_NUMBER = re.compile(r"^[^A-Za-z]*\d[^A-Za-z]*$")
# Membership in these is exact, not a substring search.
_COLLECTIONS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp)


def _bare_number(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(_NUMBER.match(node.value))
    )


def numbers_sought_in_text(source: str) -> list[tuple[int, str]]:
    """(line, code) of every `<number literal> in <expression>` and `not in`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        lefts = [node.left, *node.comparators[:-1]]
        for left, op, right in zip(lefts, node.ops, node.comparators, strict=True):
            if (
                isinstance(op, (ast.In, ast.NotIn))
                and _bare_number(left)
                and not isinstance(right, _COLLECTIONS)
            ):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_scan_finds_the_line_that_failed_by_chance() -> None:
    original = 'log = operator.log()\nassert "403" not in log, log\n'
    assert numbers_sought_in_text(original) == [(2, "'403' not in log")]


def test_the_scan_finds_other_numbers_in_text() -> None:
    source = "\n".join(
        [
            'assert "1.0" in metrics',
            "assert '2/' in out or x",
            'wait_for(lambda: ":29500" in out)',
            'ok = "404" not in text',
        ]
    )
    assert [line for line, _ in numbers_sought_in_text(source)] == [1, 2, 3, 4]


def test_the_scan_leaves_exact_and_worded_matches_alone() -> None:
    source = "\n".join(
        [
            'assert "403" in ("403", "404")',
            'assert "0" in {"0", "1"}',
            "assert 403 in codes",
            'assert "HTTP 403:" in line',
            "assert f'exit code {code}' in message",
            'assert "=" in kv',
        ]
    )
    assert numbers_sought_in_text(source) == []


def test_no_test_looks_for_a_bare_number_in_text() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{line}: {code}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, code in numbers_sought_in_text(path.read_text())
    ]
    assert found == [], "match the number's own field, or the words around it:\n" + "\n".join(found)

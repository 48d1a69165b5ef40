"""What an operator process logged and counted that a reader would take for trouble.

Lines are matched by their structure (kopf's format, the level in its own field, a
traceback's first line as Python prints it), never by a word or number that a timestamp,
a name or a message quoting a pod could hold by chance."""

from __future__ import annotations

import re
from collections.abc import Iterable

from support.operator_process import OperatorProcess

# kopf's format: "[time] logger-name-cut-to-20 [LEVEL   ] message".
_RECORD = re.compile(r"^\[[^]]*\] (?P<logger>\S+)\s+\[(?P<level>[A-Z]+)\s*\] ")
_TROUBLE_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
# Python's first line of a traceback; indented and marked within an exception group's.
_TRACEBACK = re.compile(r"^[ |+]*(Exception Group )?Traceback \(most recent call last\):")
OURS = "multigpu_operator."


def troubles_in(lines: Iterable[str], loggers: str = OURS) -> list[str]:
    """The warnings and errors of the loggers whose (cut) names start with `loggers` (""
    for every logger, kopf's included), and the first line of every traceback."""
    found = []
    for line in lines:
        record = _RECORD.match(line)
        if record:
            if record["level"] in _TROUBLE_LEVELS and record["logger"].startswith(loggers):
                found.append(line)
        elif _TRACEBACK.match(line):
            found.append(line)
    return found


def troubles(operator: OperatorProcess, loggers: str = OURS) -> list[str]:
    """The operator's own warnings and errors, and every traceback, over its whole log
    (all the processes that wrote to it)."""
    return troubles_in(operator.log_path.read_text(errors="replace").splitlines(), loggers)


def refusals(operator: OperatorProcess) -> list[str]:
    """The operator's warnings and errors, and kopf's about its permissions (a watch or
    list refused): what an API server's 403 answer leaves in the log. (kopf's others, a
    request retried on a busy machine, say nothing about RBAC.)"""
    kopf = troubles(operator, loggers="kopf.")
    return troubles(operator) + [line for line in kopf if "permissions" in line]


def reconcile_errors(operator: OperatorProcess) -> float:
    """mgj_reconcile_errors_total of the running process."""
    for line in operator.metrics().splitlines():
        if line.startswith("mgj_reconcile_errors_total "):
            return float(line.split()[1])
    raise AssertionError("mgj_reconcile_errors_total is not served")


def assert_calm(operator: OperatorProcess) -> None:
    """No warning, error or traceback logged, nothing counted as a reconcile error."""
    assert troubles(operator) == [], operator.log()
    assert reconcile_errors(operator) == 0

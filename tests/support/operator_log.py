"""What an operator process logged and counted that a reader would take for trouble."""

from __future__ import annotations

import re

from support.operator_process import OperatorProcess

# kopf's format: "[time] logger-name-cut-to-20 [LEVEL   ] message".
_OUR_TROUBLE = re.compile(r"^\[[^]]*\] multigpu_operator\.\S*\s+\[(WARNING|ERROR|CRITICAL)")


def troubles(operator: OperatorProcess) -> list[str]:
    """The operator's own warnings and errors, and every traceback, over its whole log
    (all the processes that wrote to it)."""
    lines = operator.log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if _OUR_TROUBLE.match(line) or "Traceback" in line]


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

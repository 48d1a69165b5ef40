"""PromQL in the chart's alerts and dashboard: which metrics it names, and does it parse.

Parsing is promtool's (the real Prometheus parser): expressions are wrapped as recording
rules and checked with `promtool check rules`. Metric names are read with a small lexer,
enough for the expressions this repository writes (it fails on anything it cannot place).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MONITORING_DOC = REPO / "docs/monitoring.md"
DASHBOARD = REPO / "charts/multigpu-operator/dashboards/multigpu-jobs.json"
# Grafana's variables, replaced by values of the same kind so the expression parses.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "6h",
    "$namespace": ".*",
    "$job": ".*",
}
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "atan2", "inf", "nan",
}  # fmt: skip
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?")


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects (function and keyword names excluded)."""
    text = _BRACKETS.sub(" ", _MATCHERS.sub(" ", _STRING.sub('""', expr)))
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in KEYWORDS:
            continue
        names.add(name)
    return names


def dashboard_expressions(dashboard: Mapping[str, Any]) -> dict[str, str]:
    """Every query of a Grafana dashboard (panel targets and query variables), keyed by
    where it is, with Grafana's variables replaced so the result is plain PromQL."""
    found: dict[str, str] = {}
    for panel in _panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            found[f"panel {panel['id']} {panel['title']!r} {target['refId']}"] = target["expr"]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]["query"]
            # label_values(SELECTOR, LABEL) is Grafana's, not PromQL: check the selector.
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            found[f"variable {variable['name']}"] = inner.group(1) if inner else query
    return {where: substitute(expr) for where, expr in found.items()}


def substitute(expr: str) -> str:
    for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
    return expr


def _panels(panels: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def rule_expressions(groups: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    return {
        rule.get("alert") or rule["record"]: rule["expr"]
        for group in groups
        for rule in group["rules"]
    }


def check_rules(
    promtool: Path, groups: list[Any], folder: Path
) -> subprocess.CompletedProcess[str]:
    """`promtool check rules` on a rule file holding `groups`."""
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return subprocess.run(
        [str(promtool), "check", "rules", str(path)], capture_output=True, text=True, check=False
    )


def expect_values(
    promtool: Path,
    series: dict[str, str],
    expr: str,
    expected: dict[str, float],
    folder: Path,
    at: str = "10m",
) -> subprocess.CompletedProcess[str]:
    """Evaluate `expr` with promtool on input `series` (selector -> promtool values notation)
    and compare with `expected` (label set -> value), as `promtool test rules` does."""
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": at,
                        "exp_samples": [{"labels": k, "value": v} for k, v in expected.items()],
                    }
                ],
            }
        ],
    }
    path = folder / "expr-test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run(
        [str(promtool), "test", "rules", str(path)], capture_output=True, text=True, check=False
    )


def as_recording_rules(expressions: Mapping[str, str]) -> list[Any]:
    """Expressions wrapped as recording rules, so promtool parses each one."""
    rules = [{"record": f"check:expr_{i}", "expr": e} for i, e in enumerate(expressions.values())]
    return [{"name": "expressions", "rules": rules}]


def documented_metrics(doc: Path = MONITORING_DOC) -> set[str]:
    """Metric names in the first column of docs/monitoring.md's tables."""
    names: set[str] = set()
    for line in doc.read_text().splitlines():
        cell = line.split("|")[1] if line.startswith("|") else ""
        names.update(re.findall(r"`([A-Za-z_:][\w:]*)`", cell))
    return names


def exposed_names(documented: set[str]) -> set[str]:
    """Series names as Prometheus stores them: histograms add _bucket, _sum and _count."""
    series = set(documented)
    for name in documented:
        series |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return series


def load_dashboard(path: Path) -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(path.read_text())
    return dashboard

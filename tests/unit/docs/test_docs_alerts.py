"""The alerts the docs name are the chart's: docs/monitoring.md's count and table and the
chart README's count follow charts/multigpu-operator/templates/prometheusrule.yaml."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "charts/multigpu-operator/templates/prometheusrule.yaml"
MONITORING = REPO / "docs/monitoring.md"
CHART_README = REPO / "charts/multigpu-operator/README.md"
NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]


def chart_alerts() -> list[str]:
    return re.findall(r"^\s*- alert: (\w+)\s*$", RULES.read_text(), re.MULTILINE)


def counted(text: str, pattern: str) -> int:
    """The number word (or digits) that `pattern`'s group captures in `text`."""
    found = re.search(pattern, text.replace("\n", " "))
    assert found, f"no {pattern!r}"
    word = found.group(1).lower()
    return int(word) if word.isdigit() else NUMBERS.index(word)


def test_the_chart_has_alerts() -> None:
    assert len(chart_alerts()) >= 6, chart_alerts()


def test_monitoring_page_counts_the_charts_alerts() -> None:
    text = MONITORING.read_text()
    assert counted(text, r"one dashboard and (\w+) alerts") == len(chart_alerts())


def test_monitoring_pages_table_lists_every_alert_once() -> None:
    rows = re.findall(r"^\| `(MultiGPU\w+)` \|", MONITORING.read_text(), re.MULTILINE)
    assert sorted(rows) == sorted(chart_alerts())


def test_chart_readme_counts_the_charts_alerts() -> None:
    text = CHART_README.read_text()
    assert counted(text, r"`prometheusRule\.enabled` \((\w+) alerts\)") == len(chart_alerts())


def test_the_real_prometheus_test_fires_every_alert() -> None:
    """tests/integration/test_prometheus.py causes, fires and resolves each alert by name."""
    text = (REPO / "tests/integration/test_prometheus.py").read_text()
    calls = re.findall(r"fire_then_resolve\(\s*((?:\"\w+\"\s*,?\s*)+)", text)
    fired = {name for call in calls for name in re.findall(r"\"(\w+)\"", call)}
    assert fired == set(chart_alerts())

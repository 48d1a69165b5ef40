"""The chart's PrometheusRule: promtool checks the rendered rules and runs the unit tests in
charts/multigpu-operator/ci/alerts-test.yaml, which cover every alert."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.tools import Tools, build_tools
from support.chart import ALL_ENABLED_VALUES, CHART, only, render
from support.promql import check_rules

pytestmark = pytest.mark.uses_tools("promtool")

ALERTS_TEST = CHART / "ci/alerts-test.yaml"


@pytest.fixture(scope="module")
def tools() -> Tools:
    return build_tools("helm", "promtool", only=True)


def rendered_groups(tools: Tools, *values: str) -> list[Any]:
    rule = only(render(tools, "--set", "prometheusRule.enabled=true", *values), "PrometheusRule")
    groups: list[Any] = rule["spec"]["groups"]
    return groups


def run_alert_tests(
    tools: Tools, groups: list[Any], folder: Path
) -> subprocess.CompletedProcess[str]:
    """promtool test rules, with the rendered groups as the test file's rules.yaml."""
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    shutil.copy(ALERTS_TEST, folder / "alerts-test.yaml")
    return subprocess.run(
        [str(tools.promtool), "test", "rules", "alerts-test.yaml"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("values", [[], ["-f", str(ALL_ENABLED_VALUES)]], ids=["default", "all"])
def test_promtool_check_rules_accepts_the_rendered_rules(
    tools: Tools, values: list[str], tmp_path: Path
) -> None:
    result = check_rules(tools.promtool, rendered_groups(tools, *values), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 6 rules found" in result.stdout


def test_promtool_unit_tests_pass(tools: Tools, tmp_path: Path) -> None:
    result = run_alert_tests(tools, rendered_groups(tools), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_and_a_quiet_case(tools: Tools) -> None:
    alerts = {rule["alert"] for group in rendered_groups(tools) for rule in group["rules"]}
    cases = yaml.safe_load(ALERTS_TEST.read_text())["tests"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    assert alerts == firing == quiet


def test_the_unit_tests_notice_a_changed_threshold(tools: Tools, tmp_path: Path) -> None:
    # Guards against tests that pass whatever the rules say.
    groups = rendered_groups(tools, "--set", "prometheusRule.restartThreshold=4")
    result = run_alert_tests(tools, groups, tmp_path)
    assert result.returncode != 0
    assert "MultiGPUJobRestartingTooOften" in result.stdout + result.stderr


def test_values_name_the_alerts_by_their_real_names() -> None:
    # values.yaml says which alert each setting tunes; a renamed alert must not leave a
    # stale name there.
    template = (CHART / "templates/prometheusrule.yaml").read_text()
    alerts = set(re.findall(r"- alert: (\w+)", template))
    named = set(re.findall(r"\b(MultiGPU\w+)", (CHART / "values.yaml").read_text()))
    assert alerts
    assert named == alerts

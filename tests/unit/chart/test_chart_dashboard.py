"""The Grafana dashboard (charts/multigpu-operator/dashboards/multigpu-jobs.json): its
queries parse with promtool and name only metrics that docs/monitoring.md lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.tools import Tools, build_tools
from support.chart import CHART, only, render
from support.promql import (
    as_recording_rules,
    dashboard_expressions,
    documented_metrics,
    expect_values,
    exposed_names,
    load_dashboard,
    metric_names,
    rule_expressions,
    substitute,
)
from support.promql import check_rules as promtool_check_rules

pytestmark = pytest.mark.uses_tools("promtool")

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = CHART / "dashboards/multigpu-jobs.json"


@pytest.fixture(scope="module")
def tools() -> Tools:
    return build_tools("helm", "promtool", only=True)


def test_every_dashboard_query_parses(tools: Tools, tmp_path: Path) -> None:
    expressions = dashboard_expressions(load_dashboard(DASHBOARD))
    assert len(expressions) > 20
    result = promtool_check_rules(tools.promtool, as_recording_rules(expressions), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_and_alerts_name_only_documented_metrics(tools: Tools) -> None:
    rule = only(render(tools, "--set", "prometheusRule.enabled=true"), "PrometheusRule")
    expressions = {
        **dashboard_expressions(load_dashboard(DASHBOARD)),
        **rule_expressions(rule["spec"]["groups"]),
    }
    known = exposed_names(documented_metrics())
    unknown = {
        where: sorted(metric_names(expr) - known)
        for where, expr in expressions.items()
        if metric_names(expr) - known
    }
    assert not unknown, f"metrics missing from docs/monitoring.md: {unknown}"


def test_dashboard_covers_what_operators_of_training_jobs_ask_for() -> None:
    used = set().union(
        *map(metric_names, dashboard_expressions(load_dashboard(DASHBOARD)).values())
    )
    assert {
        "mgj_jobs",  # jobs by phase
        "mgj_job_time_to_running_seconds_bucket",  # queue time
        "mgj_job_restarts",
        "mgj_job_world_size",  # elastic world size over time
        "mgj_trainer_samples_per_second",  # per rank: stragglers
        "mgj_trainer_step_seconds_sum",
        "mgj_trainer_loss",
        "mgj_job_pod_info",  # the DCGM join
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
    } <= used


def test_dashboard_is_well_formed_for_grafana() -> None:
    dashboard = load_dashboard(DASHBOARD)
    assert dashboard["uid"] == "multigpu-jobs"
    panels = dashboard["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "namespace", "job"}
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)) > 0


def panel_expr(title: str) -> str:
    panel = next(p for p in load_dashboard(DASHBOARD)["panels"] if p["title"] == title)
    return substitute(panel["targets"][0]["expr"])


def test_gpu_utilisation_is_joined_onto_jobs_through_pod_info(tools: Tools, tmp_path: Path) -> None:
    # DCGM's own `job` label (its scrape job) gives way to the MultiGPUJob's name; GPUs of
    # pods that belong to no job drop out.
    dcgm = 'DCGM_FI_DEV_GPU_UTIL{namespace="ml",job="gpu-metrics",instance="node-1",'
    series = {
        dcgm + 'pod="ddp-0",gpu="0"}': "80x20",
        dcgm + 'pod="ddp-0",gpu="1"}': "60x20",
        dcgm + 'pod="ddp-1",gpu="2"}': "100x20",
        dcgm + 'pod="notebook",gpu="3"}': "5x20",
        'mgj_job_pod_info{namespace="ml",pod="ddp-0",job="ddp",replica="0",instance="op"}': "1x20",
        'mgj_job_pod_info{namespace="ml",pod="ddp-1",job="ddp",replica="1",instance="op"}': "1x20",
    }
    expr = panel_expr("GPU utilisation per job")
    result = expect_values(
        tools.promtool, series, expr, {'{namespace="ml",job="ddp"}': 80}, tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_gpus_are_labelled_with_the_replica_of_their_pod(tools: Tools, tmp_path: Path) -> None:
    dcgm = 'DCGM_FI_DEV_GPU_UTIL{namespace="ml",job="gpu-metrics",instance="node-1",'
    series = {
        dcgm + 'pod="ddp-0",gpu="0"}': "80x20",
        dcgm + 'pod="ddp-1",gpu="2"}': "100x20",
        'mgj_job_pod_info{namespace="ml",pod="ddp-0",job="ddp",replica="0",instance="op"}': "1x20",
        'mgj_job_pod_info{namespace="ml",pod="ddp-1",job="ddp",replica="1",instance="op"}': "1x20",
    }
    gpu = '{namespace="ml",job="ddp",instance="node-1",'
    expected: dict[str, float] = {
        gpu + 'pod="ddp-0",gpu="0",replica="0"}': 80,
        gpu + 'pod="ddp-1",gpu="2",replica="1"}': 100,
    }
    expr = panel_expr("GPU utilisation per pod and GPU")
    result = expect_values(tools.promtool, series, expr, expected, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_straggler_ratio_is_slowest_rank_over_median_rank(tools: Tools, tmp_path: Path) -> None:
    # Ranks 0 and 1 take 0.1 s per step, rank 2 takes 0.2 s: ratio 2.
    def rank(r: int, seconds_per_minute: float) -> dict[str, str]:
        labels = f'{{namespace="ml",job="ddp",rank="{r}"}}'
        return {
            f"mgj_trainer_step_seconds_sum{labels}": f"0+{seconds_per_minute}x20",
            f"mgj_trainer_step_seconds_count{labels}": "0+60x20",
        }

    series = {**rank(0, 6), **rank(1, 6), **rank(2, 12)}
    expr = panel_expr("Straggler ratio (slowest rank / median rank)")
    result = expect_values(
        tools.promtool, series, expr, {'{namespace="ml",job="ddp"}': 2}, tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr

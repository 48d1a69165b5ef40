"""The operator's state metrics register without clashing and read the job cache, and
/metrics serves them."""

from __future__ import annotations

from contextlib import nullcontext

import aiohttp
import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from multigpu_operator import metrics
from multigpu_operator.api.status import Phase

JOBS = [
    {
        "metadata": {"namespace": "ml", "name": "a"},
        "status": {"phase": "Running", "worldSize": 8, "restarts": 2},
    },
    {
        "metadata": {"namespace": "ml", "name": "b"},
        "status": {"phase": "Suspended", "worldSize": 4},
    },
]
PODS = [
    {
        "metadata": {
            "namespace": "ml",
            "name": "a-0",
            "labels": {"multigpu.dev/job-name": "a", "multigpu.dev/replica-index": "0"},
        }
    }
]


def test_state_series_per_job_and_pod() -> None:
    collector = metrics.register_state(lambda: JOBS, lambda: PODS)
    try:
        text = generate_latest(REGISTRY).decode()
    finally:
        REGISTRY.unregister(collector)
    assert 'mgj_jobs{phase="Running"} 1.0' in text
    assert 'mgj_jobs{phase="Suspended"} 1.0' in text
    assert 'mgj_job_world_size{job="a",namespace="ml"} 8.0' in text
    assert 'mgj_job_world_size{job="b",namespace="ml"} 0.0' in text  # not running
    assert 'mgj_job_restarts{job="a",namespace="ml"} 2.0' in text
    assert 'mgj_job_info{job="b",mode="",namespace="ml",phase="Suspended"} 1.0' in text
    assert 'mgj_job_pod_info{job="a",namespace="ml",pod="a-0",replica="0"} 1.0' in text


def test_a_finished_job_records_its_duration() -> None:
    body = {
        "metadata": {"namespace": "ml", "name": "a"},
        "spec": {"mode": "DistributedDataParallel"},
        "status": {"startTime": "2026-11-22T10:00:00Z", "completionTime": "2026-11-22T10:05:00Z"},
    }
    labels = {"namespace": "ml", "mode": "DistributedDataParallel", "phase": "Succeeded"}
    before = REGISTRY.get_sample_value("mgj_job_duration_seconds_sum", labels) or 0.0
    metrics.job_entered(body, Phase.RUNNING, Phase.SUCCEEDED)
    assert REGISTRY.get_sample_value("mgj_job_duration_seconds_sum", labels) == before + 300


@pytest.mark.asyncio
async def test_metrics_are_served_on_the_event_loop() -> None:
    collector = metrics.register_state(lambda: JOBS, lambda: PODS)
    runner = await metrics.serve(0)  # any free port
    try:
        port = runner.addresses[0][1]
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            assert response.status == 200
            assert response.content_type == "text/plain"
            text = await response.text()
    finally:
        await runner.cleanup()
        REGISTRY.unregister(collector)
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert {"mgj_jobs", "mgj_job_pod_info", "mgj_reconcile_duration_seconds"} <= set(families)


class Refused(Exception):
    pass


def _sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_request_is_counted_and_timed_until_its_answer_errors_included() -> None:
    labels = {"verb": "create", "resource": "test-things"}
    for fails in (False, True):
        expected = pytest.raises(Refused) if fails else nullcontext()
        with expected, metrics.api_request("create", "test-things"):
            if fails:
                raise Refused
    assert _sample("mgj_api_requests_total", labels) == 2
    assert _sample("mgj_api_request_duration_seconds_count", labels) == 2

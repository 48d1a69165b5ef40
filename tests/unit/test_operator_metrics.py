"""The operator's state metrics register without clashing and read the job cache."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest

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
    assert 'mgj_job_pod_info{job="a",namespace="ml",pod="a-0",rank="0"} 1.0' in text


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

"""Prometheus metrics per rank: names, labels, port, and a scrape of a live trainer."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from multigpu_train import metrics
from multigpu_train.errors import SetupError
from training import procs

# Every sample name a trainer exports, as documented in docs/training.md.
EXPORTED = {
    "mgj_trainer_samples_total",
    "mgj_trainer_samples_per_second",
    "mgj_trainer_step_seconds_bucket",
    "mgj_trainer_step_seconds_count",
    "mgj_trainer_step_seconds_sum",
    "mgj_trainer_data_seconds_bucket",
    "mgj_trainer_data_seconds_count",
    "mgj_trainer_data_seconds_sum",
    "mgj_trainer_loss",
    "mgj_trainer_epoch",
    "mgj_trainer_world_size",
    "mgj_trainer_restarts",
    "mgj_trainer_last_checkpoint_timestamp_seconds",
    "mgj_trainer_test_accuracy",
    "mgj_trainer_progress_step",
    "mgj_trainer_progress_total_steps",
    "mgj_trainer_progress_step_seconds",
    "mgj_trainer_progress_checkpointing",
    "mgj_trainer_progress_resumed_step",
}


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            found.setdefault(sample.name, {})[labels] = sample.value
    return found


def test_served_on_port_plus_local_rank_with_job_and_rank_labels() -> None:
    base = procs.free_port(count=2)  # rank 0 on base, local rank 1 one port up
    served = metrics.start(base, 0, "job-a", 5, world_size=6, restarts=2)
    served.observe_step(32, data_seconds=0.01, step_seconds=0.1, loss=0.5)
    served.observe_step(32, data_seconds=0.01, step_seconds=0.1, loss=0.25)
    served.checkpointed(1234.0)
    found = scrape(base)
    assert set(found) >= EXPORTED
    key = (("job", "job-a"), ("rank", "5"))
    assert found["mgj_trainer_samples_total"][key] == 64
    assert found["mgj_trainer_samples_per_second"][key] == pytest.approx(64 / 0.22)
    assert found["mgj_trainer_loss"][key] == 0.25
    assert found["mgj_trainer_world_size"][key] == 6
    assert found["mgj_trainer_restarts"][key] == 2
    assert found["mgj_trainer_last_checkpoint_timestamp_seconds"][key] == 1234.0
    assert found["mgj_trainer_step_seconds_count"][key] == 2
    assert found["mgj_trainer_data_seconds_sum"][key] == pytest.approx(0.02)

    # A second process of the same pod (LOCAL_RANK 1) serves one port up.
    metrics.start(base, 1, "job-a", 6, world_size=6, restarts=2)
    assert (("job", "job-a"), ("rank", "6")) in scrape(base + 1)["mgj_trainer_world_size"]


def test_port_in_use_is_a_setup_error() -> None:
    port = procs.free_port()
    metrics.start(port, 0, "job-b", 0, world_size=1, restarts=0)
    with pytest.raises(SetupError, match=f"cannot serve metrics on port {port}"):
        metrics.start(port, 0, "job-b", 0, world_size=1, restarts=0)


def test_live_trainer_is_scraped() -> None:
    port = procs.free_port()
    env = procs.clean_env({"MGJ_TRAINER_METRICS_PORT": str(port), "MGJ_JOB_NAME": "scraped"})
    proc = procs.start("multigpu_train.dp", ["--epochs", "1000"], env)
    key = (("job", "scraped"), ("rank", "0"))
    try:
        deadline = time.monotonic() + 90
        samples = 0.0
        while time.monotonic() < deadline and proc.poll() is None and samples < 100:
            try:
                found = scrape(port)
                samples = found.get("mgj_trainer_samples_total", {}).get(key, 0.0)
            except OSError:
                pass  # not serving yet
            time.sleep(0.5)
        assert samples >= 100, f"no training samples counted on :{port}"
        assert found["mgj_trainer_world_size"][key] == 1
        assert found["mgj_trainer_step_seconds_count"][key] > 0
        assert found["mgj_trainer_loss"][key] > 0
    finally:
        proc.kill()
        proc.communicate()

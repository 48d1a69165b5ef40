"""Reading a process's progress gauges over HTTP (cluster/process_metrics.py), from a
real prometheus_client endpoint as the trainer serves it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from multigpu_operator.cluster.process_metrics import ProcessMetrics, parse
from multigpu_operator.local.host import free_port
from multigpu_operator.policy import training


@pytest.fixture
def endpoint() -> Iterator[int]:
    """A process serving the step, the epoch and a metric the operator does not read."""
    registry = CollectorRegistry()
    labels = {"job": "train", "rank": "0"}
    Gauge(training.STEP, "steps", labels.keys(), registry=registry).labels(**labels).set(1200)
    Gauge(training.EPOCH, "epoch", labels.keys(), registry=registry).labels(**labels).set(3)
    Counter("mgj_trainer_samples", "samples", labels.keys(), registry=registry).labels(
        **labels
    ).inc(99)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    yield port
    server.shutdown()
    thread.join()


@pytest.mark.asyncio
async def test_only_the_progress_gauges_are_asked_for_and_read(endpoint: int) -> None:
    reader = ProcessMetrics()
    try:
        assert await reader.read("127.0.0.1", endpoint) == {
            training.STEP: 1200.0,
            training.EPOCH: 3.0,
        }
    finally:
        await reader.close()


@pytest.mark.asyncio
async def test_a_process_that_does_not_answer_reads_as_none() -> None:
    reader = ProcessMetrics()
    try:
        assert await reader.read("127.0.0.1", free_port()) is None
    finally:
        await reader.close()


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("", {}),
        (f'{training.STEP}{{job="j",rank="0"}} 5.0\n', {training.STEP: 5.0}),
        (f'{training.STEP}{{job="j",rank="0"}} NaN\n', {}),  # never set: not a number
        ('other_metric{job="j"} 1.0\n', {}),
    ],
)
def test_parse(text: str, values: dict[str, float]) -> None:
    assert parse(text) == values

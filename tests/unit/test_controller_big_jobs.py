"""One job cannot take the operator down: a huge job is refused before it is planned, a
big one is planned off the event loop and its pods created in bounded batches, and the
loop keeps serving everything else meanwhile. On the real loop clock: what is measured
is the loop's responsiveness while a worker thread plans."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from multigpu_operator.controller import CREATE_BATCH
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster

pytestmark = pytest.mark.asyncio


async def settle(done: Callable[[], bool], seconds: float = 60) -> None:
    """Poll until `done()`; the controller changes the fake cluster in the meantime."""
    async with asyncio.timeout(seconds):
        while not done():  # noqa: ASYNC110 (the fake cluster has no event to wait on)
            await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"replicas": 100_000}, "spec.replicas", id="replicas-100000"),
        pytest.param({"replicas": 2**31 - 1}, "spec.replicas", id="replicas-int32-max"),
        pytest.param(
            {"replicas": 2, "gpusPerReplica": 2**31 - 1},
            "spec.gpusPerReplica",
            id="world-size-past-int32",
        ),
    ],
)
async def test_a_huge_job_fails_at_once_without_being_planned(
    spec: dict[str, int], field: str
) -> None:
    cluster = FakeCluster()
    tracemalloc.start()
    try:
        async with running_controller(cluster):
            cluster.add_job("train", ddp_spec(**spec))
            await settle(lambda: cluster.status("train").get("phase") == "Failed", 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    failed = cluster.condition("train", "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert field in failed["message"]
    assert cluster.pod_names() == set()
    assert peak < 50 * 2**20  # nothing in proportion to the number typed


async def test_a_big_job_is_planned_off_the_loop_and_created_in_batches() -> None:
    cluster = FakeCluster()
    replicas = 3000  # about 0.3 s to plan: a stall the loop would feel
    lags: list[float] = []
    in_flight, most = 0, 0
    create_pod = cluster.create_pod

    async def counting_create_pod(namespace: str, pod: Mapping[str, Any]) -> bool:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(0.001)  # a request takes a while: requests overlap
            return await create_pod(namespace, pod)
        finally:
            in_flight -= 1

    cluster.create_pod = counting_create_pod  # type: ignore[method-assign]

    async def ticker() -> None:
        # Until the first pod is created: planning and the first decision.
        while not cluster.calls_of("create_pod"):
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - before - 0.01)

    async with running_controller(cluster):
        tick = asyncio.create_task(ticker())
        cluster.add_job("train", ddp_spec(replicas=replicas))
        await settle(lambda: len(cluster.pods) == replicas)
        await tick
    # Planning and deciding ran in a thread: the loop kept ticking meanwhile.
    assert len(lags) > 10
    assert max(lags) < 0.25, sorted(lags)[-5:]  # planning inline stalls it 0.5 s
    assert len(cluster.calls_of("create_pod")) == replicas
    assert most == CREATE_BATCH

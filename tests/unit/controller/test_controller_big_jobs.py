"""One job cannot take the operator down: a huge job is refused before it is planned, a
big one is planned off the event loop and its pods created in bounded batches, and the
loop keeps serving everything else meanwhile (planning runs in a worker thread)."""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from multigpu_operator.actuator.children import CREATE_BATCH
from multigpu_operator.cluster.kinds import Kind
from multigpu_operator.controller import job_pass, plan_cache
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


async def test_a_big_job_is_planned_off_the_loop_and_created_in_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster()
    replicas = 3000  # about 0.3 s to plan: a stall the loop would feel
    loop_thread = threading.get_ident()
    ran_in: dict[str, set[bool]] = {"plan_object": set(), "decide": set()}
    for name, module in (("plan_object", plan_cache), ("decide", job_pass)):
        work = getattr(module, name)

        def recorded(*args: Any, _name: str = name, _work: Any = work) -> Any:
            ran_in[_name].add(threading.get_ident() == loop_thread)
            return _work(*args)

        monkeypatch.setattr(module, name, recorded)
    in_flight, most = 0, 0
    create = cluster.create

    async def counting_create(
        kind: Kind,
        namespace: str | None,
        body: Mapping[str, Any],
        dry_run: bool = False,
        read_back: bool = True,
    ) -> dict[str, Any] | None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(0.001)  # a request takes a while: requests overlap
            return await create(kind, namespace, body, dry_run, read_back)
        finally:
            in_flight -= 1

    cluster.create = counting_create  # type: ignore[method-assign]

    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(replicas=replicas))
        await settle(lambda: len(cluster.pods) == replicas)
    # Planning and deciding ran in a worker thread, never on the event loop's (a count of
    # where, not a time: the loop's lag depends on the machine).
    assert ran_in == {"plan_object": {False}, "decide": {False}}
    assert len(cluster.calls_of("create pods")) == replicas
    assert most == CREATE_BATCH

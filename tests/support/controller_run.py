"""The controller running against a FakeCluster on the event loop's (fake) clock.

Tests run on looptime's fast-forwarding loop (`@pytest.mark.looptime`): a test's
`await asyncio.sleep(60)` takes no real time, and the controller's timers, backoffs and
wall clock all follow the loop's time. The wall clock starts at T0 with the test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.controller.progress_board import Reader
from multigpu_operator.controller.workers import Controller
from multigpu_operator.settings import Settings
from support.fake_cluster import FakeCluster

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "train:1"}]}}


def ddp_spec(replicas: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "mode": "DistributedDataParallel",
        "replicas": replicas,
        "template": TEMPLATE,
        **spec,
    }


@contextlib.asynccontextmanager
async def running_controller(
    cluster: FakeCluster, reader: Reader | None = None, **settings: Any
) -> AsyncIterator[Controller]:
    """A started controller whose job events come from `cluster`; stopped on exit.
    Kueue is off unless a test asks (`kueue="auto"`): the others see only their calls.
    `reader`: the pods' training processes (support/fake_processes.py); without it only
    pods given an IP would be read, over the network."""
    loop = asyncio.get_running_loop()
    zero = loop.time()

    def clock() -> datetime:
        return T0 + timedelta(seconds=loop.time() - zero)

    controller = Controller(
        cluster,
        Settings(**{"workers": 4, "kueue": "off", **settings}),
        clock=clock,
        reader=reader,
    )
    twice = count_status_writes(controller, cluster)
    cluster.on_job_event = controller.job_event
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()
        cluster.on_job_event = None
    # The operator's invariants, checked for every test that runs the controller.
    assert not cluster.refused_statuses, f"status writes refused: {cluster.refused_statuses}"
    assert not cluster.outside_actuator, f"writes outside the actuator: {cluster.outside_actuator}"
    assert not twice, f"passes that wrote the status more than once: {twice}"


def count_status_writes(controller: Controller, cluster: FakeCluster) -> list[JobKey]:
    """Wraps the controller's pass: the keys of passes that wrote their job's status more
    than once (passes of one key never overlap; other keys' writes are not counted)."""
    twice: list[JobKey] = []
    reconcile = controller.reconcile

    async def one_pass(key: JobKey) -> None:
        def writes() -> int:
            return sum(c.args[:2] == key for c in cluster.calls_of("patch multigpujobs/status"))

        before = writes()
        try:
            await reconcile(key)
        finally:
            if writes() - before > 1:
                twice.append(key)

    controller.reconcile = one_pass  # type: ignore[method-assign]
    return twice

"""The Kueue caches (cluster/workloads.py) when Kueue's API is not served: with
MGJ_KUEUE=auto they stop at once, with MGJ_KUEUE=on they keep looking and find it once
it is installed. Either way the workers are not held back (synced)."""

from __future__ import annotations

import asyncio

import pytest

from multigpu_operator.api import kueue
from multigpu_operator.cluster.workloads import WorkloadInformer
from support.fake_cluster import FakeCluster


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
@pytest.mark.parametrize(
    ("required", "lists_each", "installed_at_last"),
    [
        pytest.param(False, 1, False, id="auto-stops-at-once"),
        pytest.param(True, 7, True, id="on-keeps-looking-and-finds-it"),
    ],
)
async def test_kueue_not_served(required: bool, lists_each: int, installed_at_last: bool) -> None:
    cluster = FakeCluster()
    informer = WorkloadInformer(cluster, lambda _key: None, "ns", required=required)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced(), 1)
        assert not informer.installed
        # Looked again after 0.5, 1, 2, 4, 8, 16 s (and jitter): installed meanwhile.
        await asyncio.sleep(30)
        cluster.kueue_installed = True
        await asyncio.sleep(30)
        assert informer.installed is installed_at_last
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for plural in (kueue.WORKLOADS, kueue.RESOURCE_FLAVORS):
        assert len(cluster.calls_of(f"list {plural}")) == lists_each

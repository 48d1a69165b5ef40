"""Other workloads' pods (cluster/foreign_pods.py) against the in-memory API server: only
bound, unfinished pods that are not the operator's are asked for and counted by node; the
watch starts with the first job placed by topology, never for jobs without placement.
Async tests run on looptime's fast-forwarding loop."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest

from multigpu_operator.cluster.errors import Forbidden
from multigpu_operator.cluster.foreign_pods import FIELDS, SELECTOR, ForeignPods, trim_foreign
from multigpu_operator.cluster.kinds import NODES, PODS
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster

GPU = "nvidia.com/gpu"
RACK = "example.com/rack"


def api_pod(
    name: str, node: str | None, phase: str = "Running", gpus: str = "1", **labels: str
) -> dict[str, Any]:
    """A pod as the API server returns it, with what the cache drops."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "image": "i", "resources": {"limits": {GPU: gpus, "cpu": "2"}}}
            ],
            "volumes": [{"name": "data"}],
        },
        "status": {"phase": phase, "podIP": "10.0.0.1"},
    }


def test_a_pod_is_kept_as_its_node_and_its_requests() -> None:
    assert trim_foreign(api_pod("web-0", "a0")) == {
        "metadata": {"namespace": "team", "name": "web-0"},
        "node": "a0",
        "requests": {GPU: Decimal(1), "cpu": Decimal(2)},
    }
    assert trim_foreign(api_pod("done", "a0", phase="Succeeded"))["node"] == ""
    assert trim_foreign(api_pod("waiting", None, phase="Pending"))["node"] == ""


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
async def test_only_bound_unfinished_pods_of_other_workloads_are_counted() -> None:
    cluster = FakeCluster()
    cluster.put(PODS, api_pod("web-0", "a0"))
    cluster.put(PODS, api_pod("web-1", "a0", gpus="2"))
    cluster.put(PODS, api_pod("batch-0", "a1", phase="Succeeded", gpus="8"))
    cluster.put(PODS, api_pod("failed-0", "a1", phase="Failed", gpus="8"))
    cluster.put(PODS, api_pod("queued-0", None, phase="Pending", gpus="8"))
    cluster.put(PODS, api_pod("ours-0", "a2", gpus="8", **{"multigpu.dev/job-name": "j"}))
    foreign = ForeignPods(cluster)
    try:
        held = await foreign.held()
        assert held == {"a0": {GPU: Decimal(3), "cpu": Decimal(4)}}
        assert foreign.snapshot() is held  # nothing changed: the same mapping
        (listed,) = cluster.calls_of("list pods")
        assert listed.args[1:] == (SELECTOR, FIELDS)

        cluster.put(PODS, api_pod("web-1", "a0", phase="Succeeded", gpus="2"))  # finished
        cluster.put(PODS, api_pod("queued-0", "b0", gpus="8"))  # bound by the scheduler
        await asyncio.sleep(1)
        assert foreign.snapshot() == {
            "a0": {GPU: Decimal(1), "cpu": Decimal(2)},
            "b0": {GPU: Decimal(8), "cpu": Decimal(2)},
        }
        cluster.remove(PODS, "web-0", namespace="team")
        cluster.expire_watches()  # 410 Gone: listed again
        await asyncio.sleep(5)
        assert foreign.snapshot() == {"b0": {GPU: Decimal(8), "cpu": Decimal(2)}}
    finally:
        await foreign.stop()
    assert len(cluster.calls_of("list pods")) == 2


def rack_node(name: str, rack: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {RACK: rack}},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", GPU: "8"}},
    }


@pytest.mark.asyncio
@pytest.mark.looptime(end=600)
async def test_the_watch_starts_with_the_first_placed_job_and_steers_it() -> None:
    cluster = FakeCluster()
    for name, rack in (("a0", "r1"), ("a1", "r1"), ("b0", "r2"), ("b1", "r2")):
        cluster.put(NODES, rack_node(name, rack))
    cluster.put(PODS, api_pod("web-0", "a0"))  # r1 is one node short for 2 x 8 GPUs
    async with running_controller(cluster) as controller:
        cluster.add_job("plain", ddp_spec(2, gpusPerReplica=8))
        await asyncio.sleep(5)
        assert not controller.foreign.started
        assert [c.args[1] for c in cluster.calls_of("list pods")] == ["multigpu.dev/job-name"]

        placement = {"topologyKey": RACK, "policy": "Required"}
        cluster.add_job("placed", ddp_spec(2, gpusPerReplica=8, placement=placement))
        await asyncio.sleep(5)
        assert controller.foreign.started
        domains = {
            pod["metadata"]["labels"].get("multigpu.dev/topology-domain")
            for (_, name), pod in cluster.pods.items()
            if name.startswith("placed-")
        }
        assert domains == {"r2"}
        assert cluster.status("placed")["placement"]["summary"] == "rack r2 (2 pods)"


@pytest.mark.asyncio
@pytest.mark.looptime(end=600)
async def test_a_placed_job_waits_for_the_nodes_first_list_before_creating_pods() -> None:
    """Nodes not listed yet (a refused first list): the job's pods are not created
    unpinned, but pinned once the nodes are known."""
    cluster = FakeCluster()
    for name, rack in (("a0", "r1"), ("a1", "r1")):
        cluster.put(NODES, rack_node(name, rack))
    cluster.fail("list nodes", Forbidden("nodes is forbidden", 403), times=2)
    async with running_controller(cluster):
        placement = {"topologyKey": RACK, "policy": "Required"}
        cluster.add_job("placed", ddp_spec(2, gpusPerReplica=8, placement=placement))
        await asyncio.sleep(10)
        pods = [p for (_, name), p in cluster.pods.items() if name.startswith("placed-")]
        assert len(pods) == 2
        assert {p["metadata"]["labels"].get("multigpu.dev/topology-domain") for p in pods} == {"r1"}

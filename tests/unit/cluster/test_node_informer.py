"""The node informer (cluster/nodes.py) against the in-memory API server, the nodes
reaching the reconcile pass through the controller, and what the pod cache keeps for the
fit check. Async tests run on looptime's
fast-forwarding loop: minutes of watch timeouts and backoff take no real time."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from multigpu_operator.cluster.errors import Forbidden
from multigpu_operator.cluster.kinds import NODES
from multigpu_operator.cluster.nodes import NodeInformer, trim_node
from multigpu_operator.cluster.trim import trim_pod
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster


def api_node(name: str, gpus: int = 8, heartbeat: str = "10:00") -> dict[str, Any]:
    """A node as the API server returns it, with what the informer drops."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"nvidia.com/gpu.product": "H100"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": [{"manager": "kubelet"}],
        },
        "spec": {
            "podCIDR": "10.0.0.0/24",
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        },
        "status": {
            "allocatable": {"cpu": "96", "nvidia.com/gpu": str(gpus)},
            "capacity": {"cpu": "96", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}],
            "images": [{"names": ["trainer:1"], "sizeBytes": 10**9}],
        },
    }


def test_a_node_is_kept_trimmed_to_what_the_fit_check_reads() -> None:
    assert trim_node(api_node("gpu-0")) == {
        "metadata": {"name": "gpu-0", "labels": {"nvidia.com/gpu.product": "H100"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": "8"}},
    }
    assert trim_node({"metadata": {"name": "bare"}}) == {
        "metadata": {"name": "bare", "labels": {}},
        "spec": {"taints": []},
        "status": {"allocatable": {}},
    }


def test_the_pod_cache_keeps_what_the_scheduler_fits_a_pod_by() -> None:
    """As admission left the pod: a webhook's toleration, a LimitRange's requests."""
    resources = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"memory": "1Gi"}}
    pod = {
        "metadata": {"name": "train-0", "namespace": "ns", "labels": {}},
        "spec": {
            "nodeName": None,
            "nodeSelector": {"nvidia.com/gpu.product": "H100"},
            "tolerations": [{"key": "team", "operator": "Exists"}],
            "overhead": {"cpu": "250m"},
            "initContainers": [
                {"name": "log", "image": "l", "restartPolicy": "Always", "resources": {}}
            ],
            "containers": [
                {"name": "trainer", "image": "t", "env": [{"name": "RANK"}], "resources": resources}
            ],
            "volumes": [{"name": "data"}],
            "hostname": "train-0",
        },
    }
    assert trim_pod(pod)["spec"] == {
        "nodeName": None,
        "nodeSelector": {"nvidia.com/gpu.product": "H100"},
        "tolerations": [{"key": "team", "operator": "Exists"}],
        "overhead": {"cpu": "250m"},
        "initContainers": [{"name": "log", "restartPolicy": "Always", "resources": {}}],
        "containers": [{"name": "trainer", "resources": resources}],
    }


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
async def test_the_informer_follows_nodes_and_ignores_heartbeats() -> None:
    cluster = FakeCluster()
    cluster.put(NODES, api_node("gpu-0"))
    informer = NodeInformer(cluster)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.sleep(1)
        first = informer.nodes()
        assert [n["metadata"]["name"] for n in first] == ["gpu-0"]

        cluster.put(NODES, api_node("gpu-0", heartbeat="10:05"))
        await asyncio.sleep(1)
        assert informer.nodes() is first  # nothing it keeps changed

        cluster.put(NODES, api_node("gpu-0", gpus=4))
        cluster.put(NODES, api_node("gpu-1"))
        await asyncio.sleep(400)  # past the server's watch timeout: watched again
        cluster.expire_watches()  # 410 Gone: listed again
        cluster.remove(NODES, "gpu-1")
        await asyncio.sleep(1)
        nodes = informer.nodes()
    finally:
        task.cancel()
    assert [
        (n["metadata"]["name"], n["status"]["allocatable"]["nvidia.com/gpu"]) for n in nodes
    ] == [("gpu-0", "4")]
    assert len(cluster.calls_of("list nodes")) == 2


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
async def test_without_permission_to_read_nodes_it_says_so_once_and_knows_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    cluster.put(NODES, api_node("gpu-0"))
    denied = 'nodes is forbidden: User "operator" cannot list resource "nodes"'
    cluster.fail("list nodes", Forbidden(denied, 403), times=5)
    informer = NodeInformer(cluster)
    task = asyncio.create_task(informer.run())
    try:
        with caplog.at_level(logging.WARNING, logger="multigpu_operator.cluster.nodes"):
            await asyncio.sleep(10)
            assert informer.nodes() == ()
            await asyncio.sleep(600)  # granted meanwhile: the retries find the nodes
    finally:
        task.cancel()
    assert [r.getMessage() for r in caplog.records] == [
        f"cannot read nodes ({denied}); jobs that no node can fit are not told apart from "
        "a busy cluster until this heals"
    ]
    assert [n["metadata"]["name"] for n in informer.nodes()] == ["gpu-0"]


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
async def test_the_controller_hands_the_nodes_to_each_pass() -> None:
    cluster = FakeCluster()
    for i in range(2):
        cluster.put(NODES, api_node(f"gpu-{i}"))
    spec = ddp_spec(gpusPerReplica=16, gang={"timeoutSeconds": 60, "onTimeout": "Requeue"})
    async with running_controller(cluster):
        cluster.add_job("train", spec)
        await asyncio.sleep(1)
        for name in ("train-0", "train-1"):
            cluster.set_unschedulable(
                name, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu"
            )
        await asyncio.sleep(1)
        waiting = cluster.condition("train", "Scheduled")
        await asyncio.sleep(60)
    assert waiting["reason"] == "NoNodeFits"
    assert waiting["message"].startswith(
        "no node can ever fit pod train-0: it asks for 16 nvidia.com/gpu, the largest node has 8"
    )
    assert [e.reason for e in cluster.events if e.type == "Warning"] == ["NoNodeFits", "NoNodeFits"]
    status = cluster.status("train")
    assert (status["phase"], status["reason"]) == ("Failed", "NoNodeFits")
    assert cluster.pod_names() == set()

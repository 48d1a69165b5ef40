"""A node lost under a running job, through the controller and an in-memory cluster
(support/fake_cluster.py): the status the API server's schema accepts, the new attempt
not counted, its pods created off the lost node."""

from __future__ import annotations

import asyncio

import pytest

from multigpu_operator.cluster.kinds import NODES
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster
from support.policy import gpu_node

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]


async def test_a_lost_node_restarts_the_job_uncounted_and_its_pods_avoid_it() -> None:
    cluster = FakeCluster()
    for name in ("gpu-node-0", "gpu-node-1", "gpu-node-2"):
        cluster.put(NODES, gpu_node(name))
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(gpusPerReplica=8, runPolicy={"backoffLimit": 0}))
        await asyncio.sleep(1)
        for name in ("train-0", "train-1"):
            cluster.set_phase(name, "Running")  # both on gpu-node-0 here
        await asyncio.sleep(1)
        cluster.remove(NODES, "gpu-node-0")
        cluster.set_phase("train-0", "Failed")  # PodGC ends the pods of a removed node
        await asyncio.sleep(5)
    status = cluster.status("train")
    assert (status["attempt"], status["restarts"], status["infrastructureRestarts"]) == (2, 0, 1)
    assert status["avoidedNodes"] == ["gpu-node-0"]
    assert status["lastFailure"]["fault"] == "NodeLost"
    assert [a["attempt"] for a in status["attempts"]] == [1, 2]
    assert status["attempts"][0]["reason"] == "NodeLost"
    for name in ("train-0", "train-1"):
        pod = cluster.pods["ns", name]
        assert pod["metadata"]["labels"]["multigpu.dev/attempt"] == "2"
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert terms == [
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-node-0"]}
                ]
            }
        ]
    assert "NodeLost" in [e.reason for e in cluster.events]

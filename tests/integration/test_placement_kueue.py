"""spec.placement through a real Kueue's Topology Aware Scheduling (v0.19,
tests/cluster/kueue.py): a Topology of block, rack and host levels, a ResourceFlavor that
names it, simulated GPU nodes labelled as 1 block x 2 racks x 4 nodes x 8 GPUs, and
queued jobs asking for one rack.

Kueue admits each job into one rack and the pods follow its topology assignment in rank
order (replica i on the i-th host of the assignment); a job that no rack can hold waits
in Kueue, and its status says so with Kueue's own message.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cluster.kueue import Kueue
from cluster.localcluster import LocalCluster
from cluster.node_manifests import GPU_RESOURCE, gpu_node
from multigpu_operator.api import kueue
from multigpu_operator.api.kueue_topology import topology_assignment
from support.jobs import RUN_LONG, SIM, JobEnv, condition, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.uses_tools("kueue")]

POOL = f"{SIM}/pool"
BLOCK = "topology.example.com/block"
RACK = "topology.example.com/rack"
HOST = "kubernetes.io/hostname"
RACKS, NODES = 2, 4


@pytest.fixture(scope="module")
def real_kueue(installed_crd: LocalCluster) -> Iterator[Kueue]:
    controller = Kueue(installed_crd)
    started = not controller.running()
    controller.up()
    yield controller
    if started and not os.environ.get("MGJ_KEEP_CLUSTER"):
        controller.down()


class Topology:
    """The test's nodes and Kueue's objects: cluster-scoped names carry its pool."""

    def __init__(self, jobs: JobEnv, custom: client.CustomObjectsApi) -> None:
        self.jobs = jobs
        self.custom = custom
        self.pool = f"tas-{uuid.uuid4().hex[:6]}"
        self.nodes = [f"{self.pool}-r{r}-n{n}" for r in range(RACKS) for n in range(NODES)]

    def node_objects(self) -> list[dict[str, Any]]:
        out = []
        for name in self.nodes:
            node = gpu_node(name, 8)
            rack = name.split("-")[-2]
            node["metadata"]["labels"].update({POOL: self.pool, BLOCK: "b0", RACK: rack})
            node["spec"]["taints"].append({"key": POOL, "value": self.pool, "effect": "NoSchedule"})
            out.append(node)
        return out

    def manifests(self) -> list[dict[str, Any]]:
        """As docs/placement.md shows them."""
        v = kueue.API_VERSION
        return [
            {
                "apiVersion": v,
                "kind": "Topology",
                "metadata": {"name": self.pool},
                "spec": {
                    "levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]
                },
            },
            {
                "apiVersion": v,
                "kind": "ResourceFlavor",
                "metadata": {"name": self.pool},
                "spec": {"nodeLabels": {POOL: self.pool}, "topologyName": self.pool},
            },
            {
                "apiVersion": v,
                "kind": "ClusterQueue",
                "metadata": {"name": self.pool},
                "spec": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": self.jobs.namespace}
                    },
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU_RESOURCE],
                            "flavors": [
                                {
                                    "name": self.pool,
                                    "resources": [{"name": GPU_RESOURCE, "nominalQuota": 256}],
                                }
                            ],
                        }
                    ],
                },
            },
            {
                "apiVersion": v,
                "kind": "LocalQueue",
                "metadata": {"name": "racks", "namespace": self.jobs.namespace},
                "spec": {"clusterQueue": self.pool},
            },
        ]

    def submit(self, name: str, pods: int) -> None:
        manifest = job_manifest(
            name,
            replicas=pods,
            gpus=8,
            annotations=RUN_LONG,
            labels={kueue.QUEUE_NAME_LABEL: "racks"},
            placement={"topologyKey": RACK},
        )
        manifest["spec"]["template"]["spec"]["tolerations"] = [
            {"key": POOL, "operator": "Exists", "effect": "NoSchedule"}
        ]
        self.jobs.apply(manifest)

    def workload(self, job: str) -> dict[str, Any]:
        items = self.custom.list_namespaced_custom_object(
            kueue.GROUP, kueue.VERSION, self.jobs.namespace, kueue.WORKLOADS
        )["items"]
        owned = [
            w for w in items if any(r["name"] == job for r in w["metadata"]["ownerReferences"])
        ]
        return owned[0] if owned else {}


@pytest.fixture
def topology(
    real_kueue: Kueue,
    jobs: JobEnv,
    api_client: client.ApiClient,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Topology]:
    topo = Topology(jobs, client.CustomObjectsApi(api_client))
    cluster = jobs.cluster
    items = topo.node_objects()
    cluster.kubectl(
        "create", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": items})
    )
    cluster.wait_nodes_ready(topo.nodes, timeout=120)
    for manifest in topo.manifests():
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    proc = OperatorProcess(cluster.kubeconfig, jobs.namespace, tmp_path / "op.log", kueue="on")
    proc.start()
    try:
        yield topo
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f"--- operator log ---\n{proc.log()[-6000:]}")
            print(f"--- kueue log ---\n{real_kueue.log()[-6000:]}")
        cluster.kubectl("delete", "-n", jobs.namespace, "mgj", "--all", "--wait=false")
        wait_for(lambda: not topo.workload("a") and not topo.workload("b"), "Workloads gone", 60)
        proc.stop()
        jobs.core.delete_collection_namespaced_pod(jobs.namespace, grace_period_seconds=0)
        for kind in ("clusterqueues", "resourceflavors", "topologies"):
            cluster.kubectl("delete", f"{kind}.kueue.x-k8s.io", topo.pool, "--wait=false")
        cluster.kubectl("delete", "node", *topo.nodes, "--wait=false", check=False)


def test_queued_jobs_admitted_into_one_rack_in_rank_order(topology: Topology) -> None:
    jobs = topology.jobs
    topology.submit("a", 4)
    topology.submit("b", 3)
    topology.submit("huge", 5)  # no rack of 4 nodes holds 5 pods of 8 GPUs
    for name, pods in (("a", 4), ("b", 3)):
        running = wait_for(_running(jobs, name, pods), f"{name} running", 90)
        status = jobs.status(name)
        (domain,) = status["placement"]["domains"]
        assert domain["pods"] == pods
        by_index = sorted(
            running, key=lambda p: int(p.metadata.labels["multigpu.dev/replica-index"])
        )
        racks = {p.spec.node_name.split("-")[-2] for p in running}
        assert racks == {domain["name"]}
        # Replica i on the i-th host of Kueue's assignment.
        (assigned,) = topology.workload(name)["status"]["admission"]["podSetAssignments"]
        hosts = _hosts(assigned["topologyAssignment"])
        assert [p.spec.node_name for p in by_index] == hosts

    def huge_waits() -> str | None:
        status = jobs.status("huge")
        said = condition(status, "Suspended").get("message", "")
        if status.get("reason") != "WaitingForAdmission" or "topology" not in said:
            return None
        return str(said)

    said = wait_for(huge_waits, "huge waiting with Kueue's topology message", 60)
    reserved = condition(topology.workload("huge").get("status") or {}, kueue.QUOTA_RESERVED)
    assert reserved.get("status") == "False"
    assert said.endswith(reserved["message"])
    assert not jobs.pods("huge")


def _running(jobs: JobEnv, name: str, pods: int) -> Callable[[], list[Any]]:
    return lambda: jobs.running(name, pods)


def _hosts(assignment: dict[str, Any]) -> list[str]:
    """The host of each pod, in order, from a topology assignment."""
    read = topology_assignment(assignment)
    assert read is not None
    return [dict(zip(read.levels, v, strict=True))[HOST] for v, n in read.domains for _ in range(n)]

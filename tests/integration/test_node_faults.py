"""Infrastructure faults under a running DistributedDataParallel job, on simulated GPU
nodes and the real control plane: the pods a fault ends start a new attempt not counted
against backoffLimit, and the new attempt keeps off the node (status.avoidedNodes).

Each test runs its job on two 8-GPU nodes of its own (labelled and tainted for its
namespace only), so the taints it puts on a node never touch another test's pods on the
shared cluster; the nodes go when the test ends.

The faults, as the cluster makes them:
- unreachable: the taint the node lifecycle controller puts on a node that stopped
  reporting. Here the node's kwok heartbeat goes on, so that controller removes the taint
  again at its next pass (every node-monitor-period, 5 s on this cluster): the job's pods
  tolerate it for 0 s, so the taint-eviction controller evicts them before that, and the
  test puts the taint back until the job has seen the fault.
- a GPU health taint (what NVIDIA's fault quarantine puts on a node with a bad GPU): no
  pod tolerates it, the taint-eviction controller evicts them at once.
- the kubelet reporting a pod's GPU Unhealthy in containerStatuses[].
  allocatedResourcesStatus (KEP-4680), which the kwok stage mgj-pod-gpu-unhealthy sets
  on a pod annotated sim.multigpu.dev/gpu-unhealthy-after, failing the pod.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from cluster.localcluster import LocalCluster
from cluster.node_manifests import gpu_node
from support.jobs import RUN_LONG, SIM, JobEnv, condition, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for

POOL = f"{SIM}/pool"  # label and taint key of a test's own nodes
UNREACHABLE = "node.kubernetes.io/unreachable"
GPU_HEALTH = "nvidia.com/gpu.health"
REPLICAS = 8


@dataclass(frozen=True)
class Pool:
    """A test's own GPU nodes, only its pods tolerate them."""

    name: str
    nodes: tuple[str, ...]
    core: client.CoreV1Api

    def taint(self, node: str, key: str, value: str = "") -> None:
        taints = list(self.core.read_node(node).spec.taints or [])
        taints.append(client.V1Taint(key=key, value=value or None, effect="NoExecute"))
        self.core.patch_node(node, {"spec": {"taints": taints}})

    def has_taint(self, node: str, key: str) -> bool:
        return any(t.key == key for t in self.core.read_node(node).spec.taints or [])

    def untaint(self, node: str, key: str) -> None:
        taints = [t for t in self.core.read_node(node).spec.taints or [] if t.key != key]
        self.core.patch_node(node, {"spec": {"taints": taints}})

    def job(self, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        """An 8-pod DDP job of one GPU a pod, on these nodes only, tolerating an
        unreachable node for 0 s (see the module's docstring)."""
        manifest = job_manifest(
            name,
            replicas=REPLICAS,
            gpus=1,
            annotations={**RUN_LONG, **(annotations or {})},
            runPolicy={"restartPolicy": "OnFailure", "backoffLimit": 0},
        )
        manifest["spec"]["template"]["spec"].update(
            nodeSelector={POOL: self.name},
            tolerations=[
                {"key": POOL, "operator": "Equal", "value": self.name, "effect": "NoSchedule"},
                {
                    "key": UNREACHABLE,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 0,
                },
            ],
        )
        return manifest


@pytest.fixture
def pool(jobs: JobEnv) -> Iterator[Pool]:
    name = f"faults-{uuid.uuid4().hex[:6]}"
    nodes = [gpu_node(f"{name}-{i}", 8) for i in range(2)]
    for node in nodes:
        node["metadata"]["labels"][POOL] = name
        node["spec"]["taints"].append({"key": POOL, "value": name, "effect": "NoSchedule"})
    cluster: LocalCluster = jobs.cluster
    names = tuple(n["metadata"]["name"] for n in nodes)
    cluster.kubectl(
        "create", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": nodes})
    )
    try:
        cluster.wait_nodes_ready(list(names), timeout=120)
        yield Pool(name, names, jobs.core)
    finally:
        # The jobs and their pods first (at once), so no pod is left bound to a node that
        # is gone; the operator is still running and would replace pods of a live job.
        cluster.kubectl("delete", "-n", jobs.namespace, "multigpujobs", "--all", "--wait=false")
        jobs.core.delete_collection_namespaced_pod(jobs.namespace, grace_period_seconds=0)
        cluster.kubectl("delete", "node", *names, "--wait=false", check=False)


def running_attempt(jobs: JobEnv, job: str, attempt: int) -> list[Any]:
    """The job's pods if all REPLICAS run and belong to `attempt`, else []."""
    pods = jobs.running(job, REPLICAS)
    labels = {p.metadata.labels["multigpu.dev/attempt"] for p in pods}
    return pods if labels == {str(attempt)} else []


def busiest_node(pods: list[Any]) -> str:
    """The node that runs most of these pods (so a fault there ends some of them)."""
    nodes: list[str] = [p.spec.node_name for p in pods]
    return max(set(nodes), key=nodes.count)


def fault_until_judged(jobs: JobEnv, pool: Pool, node: str, key: str, value: str = "") -> None:
    """Taint `node` until the job has judged the fault, as a node that stays bad stays
    tainted: the node lifecycle controller takes the unreachable taint off a node that
    still reports Ready, maybe before the taint-eviction controller of a busy machine
    looked at it. Judged while the taint is there, since it may name the fault."""

    def judged() -> bool:
        if jobs.status("train").get("infrastructureRestarts"):
            return True
        if not pool.has_taint(node, key):
            pool.taint(node, key, value)
        return False

    wait_for(judged, f"the job to judge the fault on {node}", timeout=90, interval=0.5)


def assert_recovered_off(jobs: JobEnv, pool: Pool, bad: str, fault: str) -> None:
    """The job's second attempt runs all its pods off `bad`, not counted against
    backoffLimit (0: a counted restart would have failed the job)."""
    pods = wait_for(lambda: running_attempt(jobs, "train", 2), "attempt 2 running", timeout=120)
    assert all(p.spec.node_name != bad for p in pods)
    for pod in pods:
        terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        expressions = [e for t in terms.node_selector_terms for e in t.match_expressions or []]
        assert any(
            e.key == "kubernetes.io/hostname" and e.operator == "NotIn" and bad in e.values
            for e in expressions
        )
    status = jobs.wait_phase("train", "Running")
    assert status["attempt"] == 2
    assert status.get("restarts", 0) == 0
    assert status["infrastructureRestarts"] == 1
    assert status["lastFailure"]["fault"] == fault
    assert status["lastFailure"]["node"] == bad
    assert status["avoidedNodes"] == [bad]
    assert condition(status, "Restarting")["status"] == "False"


def test_an_unreachable_node_restarts_the_job_uncounted_and_off_the_node(
    operator: OperatorProcess, jobs: JobEnv, pool: Pool
) -> None:
    jobs.apply(pool.job("train"))
    first = wait_for(lambda: running_attempt(jobs, "train", 1), "attempt 1 running", timeout=120)
    bad = busiest_node(first)
    try:
        fault_until_judged(jobs, pool, bad, UNREACHABLE)
        # The second attempt is kept off the node by the job's avoidance: the node
        # lifecycle controller soon takes the taint off a node that reports Ready.
        assert_recovered_off(jobs, pool, bad, "NodeLost")
    finally:
        pool.untaint(bad, UNREACHABLE)


def test_a_gpu_health_taint_restarts_the_job_uncounted_and_off_the_node(
    operator: OperatorProcess, jobs: JobEnv, pool: Pool
) -> None:
    jobs.apply(pool.job("train"))
    first = wait_for(lambda: running_attempt(jobs, "train", 1), "attempt 1 running", timeout=120)
    bad = busiest_node(first)
    try:
        fault_until_judged(jobs, pool, bad, GPU_HEALTH, "unhealthy")
    finally:
        pool.untaint(bad, GPU_HEALTH)
    assert_recovered_off(jobs, pool, bad, "GPUUnhealthy")


def test_a_gpu_reported_unhealthy_in_the_pod_status_restarts_the_job_uncounted_and_off_the_node(
    operator: OperatorProcess, jobs: JobEnv, pool: Pool
) -> None:
    jobs.apply(pool.job("train"))
    first = wait_for(lambda: running_attempt(jobs, "train", 1), "attempt 1 running", timeout=120)
    victim = first[3]
    bad = victim.spec.node_name
    jobs.annotate(
        victim.metadata.name,
        {f"{SIM}/gpu-unhealthy-after": "0s", f"{SIM}/gpu-device": "GPU-3f1c"},
    )
    assert_recovered_off(jobs, pool, bad, "GPUUnhealthy")
    last = jobs.status("train")["lastFailure"]
    # The device the kubelet named: the API server kept allocatedResourcesStatus.
    assert (last["pod"], last["device"]) == (victim.metadata.name, "GPU-3f1c")

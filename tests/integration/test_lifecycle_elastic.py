"""Elastic jobs on the real control plane: the scale subresource, and node loss."""

from __future__ import annotations

import json
import subprocess
import uuid
from functools import partial
from typing import Any

import pytest
from kubernetes import client

from cluster.localcluster import LocalCluster, gpu_node
from support.jobs import apply, job_manifest, job_status, live_pods
from support.operator_process import OperatorProcess
from support.waiting import wait_for

RUN_LONG = {"sim.multigpu.dev/succeed-after": "600s"}


def settled(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str, pods: int
) -> dict[str, Any] | None:
    """The job's status once `pods` pods run and the status says so."""
    running = [p for p in live_pods(core, namespace, "el") if p.status.phase == "Running"]
    status = job_status(api_client, namespace, "el")
    if len(running) == pods and status.get("pods", {}).get("running") == pods:
        return status
    return None


def scale(cluster: LocalCluster, namespace: str, replicas: int) -> None:
    cluster.kubectl("scale", "-n", namespace, "mgj/el", f"--replicas={replicas}")


def test_scale_2_to_4_to_1_through_the_scale_subresource(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    limits = {"minReplicas": 1, "maxReplicas": 4}
    apply(installed_crd, namespace, job_manifest("el", "Elastic", 2, 2, RUN_LONG, elastic=limits))
    status = wait_for(lambda: settled(api_client, core, namespace, 2), "2 pods")
    assert (status["phase"], status["worldSize"]) == ("Running", 4)
    for replicas in (4, 1):
        scale(installed_crd, namespace, replicas)
        status = wait_for(partial(settled, api_client, core, namespace, replicas), f"{replicas}")
        assert status["worldSize"] == 2 * replicas
        assert status["phase"] == "Running"
        names = {p.metadata.name for p in live_pods(core, namespace, "el")}
        assert names == {f"el-{i}" for i in range(replicas)}
    # Outside [min, max] the API server refuses, naming the field.
    with pytest.raises(subprocess.CalledProcessError) as refused:
        scale(installed_crd, namespace, 5)
    assert "spec.replicas" in refused.value.stderr


def test_a_lost_node_shrinks_the_job_and_a_returning_node_refills_it(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    # Two nodes of this test's own, so other tests' pods cannot take the capacity.
    pool = f"pool-{uuid.uuid4().hex[:6]}"
    nodes = [f"{pool}-a", f"{pool}-b"]

    def add_node(name: str) -> None:
        node = gpu_node(name, 8)
        node["metadata"]["labels"]["mgj-test/pool"] = pool
        installed_crd.kubectl("create", "-f", "-", stdin=json.dumps(node))
        installed_crd.wait_nodes_ready([name])

    for name in nodes:
        add_node(name)
    try:
        manifest = job_manifest(
            "el", "Elastic", 2, 8, RUN_LONG, elastic={"minReplicas": 1, "maxReplicas": 2}
        )
        manifest["spec"]["template"]["spec"]["nodeSelector"] = {"mgj-test/pool": pool}
        apply(installed_crd, namespace, manifest)
        status = wait_for(lambda: settled(api_client, core, namespace, 2), "2 pods")
        assert status["worldSize"] == 16
        lost = core.read_namespaced_pod("el-1", namespace).spec.node_name

        core.delete_node(lost)
        # Pod GC removes the lost node's pod (about 40 s); the replacement cannot be
        # scheduled, and the job keeps running on one node.
        status = wait_for(
            lambda: settled(api_client, core, namespace, 1), "1 pod running", timeout=150
        )
        assert (status["phase"], status["worldSize"], status["restarts"]) == ("Running", 8, 0)
        wait_for(
            lambda: any(
                p.status.phase == "Pending" and p.metadata.name == "el-1"
                for p in live_pods(core, namespace, "el")
            ),
            "el-1 re-created and pending",
        )

        add_node(lost)
        status = wait_for(lambda: settled(api_client, core, namespace, 2), "refilled", timeout=60)
        assert (status["phase"], status["worldSize"]) == ("Running", 16)
    finally:
        for name in nodes:
            installed_crd.kubectl("delete", "node", name, "--ignore-not-found", "--wait=false")

"""Elastic jobs on the real control plane: the scale subresource, and node loss (the
controller-manager's pod garbage collector ends the pods of a deleted Node; the job keeps
its replacement off that node for the rest of its life, through the real scheduler)."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from functools import partial
from typing import Any

import pytest

from cluster.node_manifests import gpu_node
from support.jobs import RUN_LONG, JobEnv, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for


def settled(jobs: JobEnv, pods: int) -> dict[str, Any] | None:
    """The job's status once `pods` pods run and the status says so."""
    running = [p for p in jobs.pods("el") if p.status.phase == "Running"]
    status = jobs.status("el")
    if len(running) == pods and status.get("pods", {}).get("running") == pods:
        return status
    return None


def test_scale_2_to_4_to_1_through_the_scale_subresource(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    limits = {"minReplicas": 1, "maxReplicas": 4}
    jobs.apply(job_manifest("el", "Elastic", 2, 0, RUN_LONG, elastic=limits))
    status = wait_for(partial(settled, jobs, 2), "2 pods")
    assert (status["phase"], status["worldSize"]) == ("Running", 2)
    for replicas in (4, 1):
        jobs.scale("el", replicas)
        status = wait_for(partial(settled, jobs, replicas), f"{replicas} pods")
        assert status["worldSize"] == replicas  # one process per CPU pod
        assert status["phase"] == "Running"
        assert {p.metadata.name for p in jobs.pods("el")} == {f"el-{i}" for i in range(replicas)}
    # Outside [min, max] the API server refuses, naming the field.
    with pytest.raises(subprocess.CalledProcessError) as refused:
        jobs.scale("el", 5)
    assert "spec.replicas" in refused.value.stderr


def test_a_lost_node_shrinks_the_job_is_avoided_when_back_and_a_new_node_refills_it(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    # Two nodes of this test's own, so other tests' pods cannot take the capacity.
    pool = f"pool-{uuid.uuid4().hex[:6]}"
    nodes = [f"{pool}-a", f"{pool}-b", f"{pool}-c"]

    def add_node(name: str) -> None:
        node = gpu_node(name, 8)
        node["metadata"]["labels"]["mgj-test/pool"] = pool
        jobs.cluster.kubectl("create", "-f", "-", stdin=json.dumps(node))
        jobs.cluster.wait_nodes_ready([name])

    for name in nodes[:2]:
        add_node(name)
    try:
        limits = {"minReplicas": 1, "maxReplicas": 2}
        manifest = job_manifest("el", "Elastic", 2, 8, RUN_LONG, elastic=limits)
        manifest["spec"]["template"]["spec"]["nodeSelector"] = {"mgj-test/pool": pool}
        jobs.apply(manifest)
        status = wait_for(partial(settled, jobs, 2), "2 pods")
        assert status["worldSize"] == 16
        lost_pod = next(p for p in jobs.pods("el") if p.metadata.name == "el-1")
        lost, lost_uid = lost_pod.spec.node_name, lost_pod.metadata.uid

        jobs.core.delete_node(lost)
        # Nothing but the controller-manager's pod garbage collector ends a pod bound to a
        # deleted node (after a quarantine of about 40 s): it marks the pod Failed and
        # deletes it at once. The operator is frozen meanwhile, so no pass of it sees the
        # pod Failed, only gone (as a busy operator may): the watch's last state of the pod
        # must still tell it the node was lost. The replacement cannot be scheduled, and
        # the job keeps running on one node.
        assert operator.proc is not None
        operator.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(
                lambda: lost_uid not in {p.metadata.uid for p in jobs.pods("el")},
                "the lost pod collected",
                timeout=150,
            )
        finally:
            operator.proc.send_signal(signal.SIGCONT)
        status = wait_for(partial(settled, jobs, 1), "1 pod running", timeout=150)
        assert (status["phase"], status["worldSize"], status["restarts"]) == ("Running", 8, 0)
        wait_for(
            lambda: any(
                p.metadata.name == "el-1"
                and p.metadata.uid != lost_uid
                and p.status.phase == "Pending"
                for p in jobs.pods("el")
            ),
            "the lost pod deleted, el-1 re-created and pending",
        )

        # Not counted against backoffLimit, and the lost node is kept off: it comes back
        # Ready with room for el-1, yet el-1 waits for a node it has not lost.
        status = jobs.status("el")
        assert status["infrastructureRestarts"] == 1
        assert status["avoidedNodes"] == [lost]
        add_node(lost)
        add_node(nodes[2])
        status = wait_for(partial(settled, jobs, 2), "refilled", timeout=60)
        assert (status["phase"], status["worldSize"]) == ("Running", 16)
        placed = {p.metadata.name: p.spec.node_name for p in jobs.pods("el")}
        assert placed["el-1"] == nodes[2], placed
    finally:
        for name in nodes:
            jobs.cluster.kubectl("delete", "node", name, "--ignore-not-found", "--wait=false")

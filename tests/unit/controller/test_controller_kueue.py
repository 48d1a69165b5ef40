"""The controller with Kueue (cluster/kueue_jobs.py) against the in-memory cluster: the
Workload it creates, the pods it starts once the test (playing Kueue) admits it, and the
jobs it leaves alone (spec.managedBy)."""

from __future__ import annotations

import asyncio

import pytest

from multigpu_operator.api import kueue
from multigpu_operator.cluster.kinds import RESOURCE_FLAVORS, WORKLOAD_PRIORITY_CLASSES
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]

QUEUED = {kueue.QUEUE_NAME_LABEL: "team-a", kueue.PRIORITY_CLASS_LABEL: "high"}
ADMITTED = {
    "conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""},
    ],
    "admission": {
        "clusterQueue": "gpus",
        "podSetAssignments": [{"name": "workers", "flavors": {"nvidia.com/gpu": "h100"}}],
    },
}


def with_kueue() -> FakeCluster:
    cluster = FakeCluster()
    cluster.kueue_installed = True
    cluster.put(
        RESOURCE_FLAVORS,
        {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"pool": "h100"}}},
    )
    cluster.put(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000})
    return cluster


async def test_a_queued_job_gets_a_workload_and_its_pods_only_once_admitted() -> None:
    cluster = with_kueue()
    async with running_controller(cluster, kueue="auto"):
        cluster.add_job("train", ddp_spec(replicas=2, gpusPerReplica=4), labels=QUEUED)
        await asyncio.sleep(5)
        (workload,) = cluster.workloads()
        assert workload["spec"]["queueName"] == "team-a"
        assert workload["spec"]["priority"] == 1000
        assert workload["spec"]["podSets"][0]["count"] == 2
        assert workload["metadata"]["finalizers"] == [kueue.RESOURCE_IN_USE_FINALIZER]
        assert cluster.pod_names() == set()
        assert cluster.status("train")["reason"] == "WaitingForAdmission"
        cluster.set_workload_status(workload["metadata"]["name"], ADMITTED)
        await asyncio.sleep(5)
        assert cluster.pod_names() == {"train-0", "train-1"}
        for pod in cluster.pods.values():
            assert pod["spec"]["nodeSelector"] == {"pool": "h100"}
        assert cluster.condition("train", "Suspended")["reason"] == "Admitted"


async def test_without_kueue_installed_auto_runs_the_labelled_job_as_before() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster, kueue="auto"):
        cluster.add_job("train", ddp_spec(replicas=2), labels=QUEUED)
        await asyncio.sleep(5)
        assert cluster.pod_names() == {"train-0", "train-1"}
        assert cluster.calls_of("create workloads") == []


async def test_a_job_managed_elsewhere_gets_nothing_and_no_status() -> None:
    cluster = with_kueue()
    async with running_controller(cluster, kueue="auto"):
        cluster.add_job("theirs", ddp_spec(managedBy="example.com/other"), labels=QUEUED)
        await asyncio.sleep(5)
        assert cluster.pod_names() == set()
        assert cluster.status("theirs") == {}
        assert cluster.workloads() == []
        assert cluster.calls_of("patch multigpujobs/status") == []


async def test_a_job_multikueue_dispatches_gets_only_its_workload() -> None:
    cluster = with_kueue()
    async with running_controller(cluster, kueue="auto"):
        spec = ddp_spec(managedBy=kueue.MULTIKUEUE_CONTROLLER)
        cluster.add_job("dispatched", spec, labels=QUEUED)
        await asyncio.sleep(5)
        assert len(cluster.workloads()) == 1
        cluster.set_workload_status(cluster.workloads()[0]["metadata"]["name"], ADMITTED)
        await asyncio.sleep(5)
        assert cluster.pod_names() == set()
        assert cluster.calls_of("patch multigpujobs/status") == []

"""Jobs that name a runtime, through the controller on an in-memory cluster: a job applied
before its runtime waits and starts once it appears; the copy the job started with is
what later passes plan from, whatever becomes of the runtime. The same on a real API
server: tests/integration/test_runtimes.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from multigpu_operator.api.pod_labels import attempt_of
from multigpu_operator.cluster.kinds import CLUSTER_RUNTIMES, RUNTIMES
from multigpu_operator.policy.runtime_use import RUNTIME_NOT_FOUND
from support.controller_run import TEMPLATE, running_controller
from support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]

REF = {"runtimeRef": {"name": "gpu-ddp"}}


def runtime(image: str = "reg/pt:1", name: str = "gpu-ddp", **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{**TEMPLATE["spec"]["containers"][0], "image": image}]}}
    body = {"mode": "DistributedDataParallel", "replicas": 2, "template": template, **spec}
    body = {k: v for k, v in body.items() if v is not None}
    return {"metadata": {"name": name, "generation": 1}, "spec": body}


def images(cluster: FakeCluster) -> set[str]:
    return {p["spec"]["containers"][0]["image"] for p in cluster.pods.values()}


async def test_a_job_waits_for_its_runtime_then_starts_with_it() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", REF)
        await asyncio.sleep(1)
        assert cluster.pod_names() == set()
        status = cluster.status("train")
        created = cluster.condition("train", "Created")
        assert (status["phase"], created["status"], created["reason"]) == (
            "Pending",
            "False",
            RUNTIME_NOT_FOUND,
        )
        assert "ClusterMultiGPURuntime gpu-ddp" in created["message"]
        cluster.put(CLUSTER_RUNTIMES, runtime())
        await asyncio.sleep(1)
    assert cluster.pod_names() == {"train-0", "train-1"}
    assert images(cluster) == {"reg/pt:1"}
    recorded = cluster.status("train")["runtime"]
    assert (recorded["kind"], recorded["name"], recorded["generation"]) == (
        "ClusterMultiGPURuntime",
        "gpu-ddp",
        1,
    )


def pods(cluster: FakeCluster) -> list[tuple[str, int, str]]:
    """Each pod's name, attempt label and image, by name."""
    return sorted(
        (p["metadata"]["name"], attempt_of(p), p["spec"]["containers"][0]["image"])
        for p in cluster.pods.values()
    )


@pytest.mark.parametrize("change", ["edited", "deleted"])
async def test_attempt_2_is_attempt_1_whatever_becomes_of_the_runtime(change: str) -> None:
    cluster = FakeCluster()
    cluster.put(CLUSTER_RUNTIMES, runtime(runPolicy={"backoffLimit": 3}))
    async with running_controller(cluster):
        cluster.add_job("train", {**REF, "replicas": 3})
        await asyncio.sleep(1)
        first = pods(cluster)
        assert [(n, i) for n, _, i in first] == [
            ("train-0", "reg/pt:1"),
            ("train-1", "reg/pt:1"),
            ("train-2", "reg/pt:1"),
        ]
        if change == "edited":
            cluster.put(CLUSTER_RUNTIMES, runtime("reg/pt:2", replicas=5))
        else:
            cluster.remove(CLUSTER_RUNTIMES, "gpu-ddp", namespace="")
        await asyncio.sleep(1)
        cluster.set_phase("train-0", "Failed", exit_code=1)  # a retried failure: attempt 2
        await asyncio.sleep(5)
        status = cluster.status("train")
        assert status["attempt"] == 2
        again = pods(cluster)
    assert [(n, i) for n, _, i in again] == [(n, i) for n, _, i in first]
    assert {a for _, a, _ in again} == {2}
    assert status["runtime"]["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/pt:1"


async def test_a_namespaced_runtime_is_read_in_the_jobs_namespace_only() -> None:
    cluster = FakeCluster()
    ref = {"runtimeRef": {"kind": "MultiGPURuntime", "name": "mine"}}
    cluster.put(
        RUNTIMES, {**runtime(name="mine"), "metadata": {"name": "mine", "namespace": "other"}}
    )
    async with running_controller(cluster):
        cluster.add_job("train", ref)
        await asyncio.sleep(1)
        assert cluster.condition("train", "Created")["reason"] == RUNTIME_NOT_FOUND
        assert "in the job's namespace" in cluster.condition("train", "Created")["message"]
        cluster.put(
            RUNTIMES, {**runtime(name="mine"), "metadata": {"name": "mine", "namespace": "ns"}}
        )
        await asyncio.sleep(1)
    assert cluster.pod_names() == {"train-0", "train-1"}


async def test_a_merge_that_gives_an_invalid_job_fails_it_naming_the_field() -> None:
    cluster = FakeCluster()
    cluster.put(CLUSTER_RUNTIMES, runtime(mode="DataParallel", replicas=None))
    async with running_controller(cluster):
        cluster.add_job("bad", {**REF, "replicas": 2})
        cluster.add_job("good", {**REF, "runtimeRef": {"name": "gpu-ddp"}})
        await asyncio.sleep(1)
    failed = cluster.condition("bad", "Failed")
    assert (cluster.status("bad")["phase"], failed["reason"]) == ("Failed", "InvalidSpec")
    assert failed["message"].startswith("spec.replicas: spec.replicas must be 1")
    assert "ClusterMultiGPURuntime gpu-ddp" in failed["message"]
    assert cluster.pod_names() == {"good-0"}


async def test_a_locked_field_fails_the_job_naming_it() -> None:
    cluster = FakeCluster()
    locked = "template.spec.containers[trainer].image"
    cluster.put(CLUSTER_RUNTIMES, runtime(lockedFields=[locked]))
    template = {"spec": {"containers": [{"name": "trainer", "image": "evil/pt:1"}]}}
    async with running_controller(cluster):
        cluster.add_job("train", {**REF, "template": template})
        await asyncio.sleep(1)
    failed = cluster.condition("train", "Failed")
    assert failed["message"].startswith(f"spec.{locked}: spec.{locked} is locked by")
    assert cluster.pod_names() == set()

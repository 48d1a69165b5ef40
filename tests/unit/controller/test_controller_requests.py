"""How many API requests and Events a job costs (issue 15): counts of the calls the
controller makes on the in-memory cluster, never times. tests/bench/bench_create.py
measures the same on a real API server."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from multigpu_operator.api.names import LABEL_JOB_NAME
from multigpu_operator.cluster import kinds
from multigpu_operator.cluster.informer import PodInformer
from multigpu_operator.policy.steps.status import COUNTS_WRITE_SECONDS
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]

PODS = 8
# What the informers read runs beside the passes, once per operator, not per job. Calls
# are named as mgj_api_requests_total counts them: verb and resource.
READS = (
    "list pods",
    "watch pods",
    "list nodes",
    "watch nodes",
    "list services",
    "watch services",
    "list clustermultigpuruntimes",
    "watch clustermultigpuruntimes",
    "list multigpuruntimes",
    "watch multigpuruntimes",
)


def writes(cluster: FakeCluster) -> Counter[str]:
    return Counter(c.method for c in cluster.calls if c.method not in READS)


async def start_pods(cluster: FakeCluster, gap: float, count: int = PODS) -> None:
    """Play the scheduler, then the kubelet: each pod bound, then Running, `gap` apart."""
    for i in range(count):
        cluster.set_phase(f"train-{i}", "Pending")
    await asyncio.sleep(gap)
    for i in range(count):
        cluster.set_phase(f"train-{i}", "Running")
        await asyncio.sleep(gap)


async def test_a_normally_starting_job_costs_its_pods_its_service_and_two_status_writes() -> None:
    cluster = FakeCluster(latency=0.005)  # passes overlap the requests, as on a server
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(replicas=PODS))
        await asyncio.sleep(1)
        await start_pods(cluster, gap=0.1)
        await asyncio.sleep(2 * COUNTS_WRITE_SECONDS)
    assert cluster.status("train")["phase"] == "Running"
    calls = writes(cluster)
    # Each pod once (none again while the watch has not brought it yet), the Service once.
    assert (calls["create pods"], calls["create services"]) == (PODS, 1)
    # Pending with Created once the watch shows the pods, then Running: no write per pod,
    # none before the pods (attempt 1 is what an empty status means).
    assert calls["patch multigpujobs/status"] == 2
    assert (
        sum(calls[m] for m in ("create pods", "create services", "patch multigpujobs/status"))
        == PODS + 3
    )
    assert [e.reason for e in cluster.events] == ["PodsCreated", "PodsRunning"]
    assert calls["create events"] == len(cluster.events) <= 3
    assert calls.keys() <= {
        "create pods",
        "create services",
        "patch multigpujobs/status",
        "create events",
    }


async def test_a_suspended_job_costs_one_dry_run_and_one_status_write_per_generation() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec(replicas=PODS, suspend=True))
        await asyncio.sleep(1)
        controller.enqueue(("ns", "train"))  # a pass more, of the same generation
        await asyncio.sleep(2 * COUNTS_WRITE_SECONDS)
    assert cluster.status("train")["phase"] == "Suspended"
    calls = writes(cluster)
    # One request more than before: its first pod sent as a dry run, so that a misspelt
    # template field fails it now rather than when it is resumed (policy/steps/template_check.py);
    # once per generation, never per pass. A job that creates its pods at once, as above,
    # pays nothing: the creates are the check.
    assert (
        calls["dry-run pods"],
        calls["patch multigpujobs/status"],
        calls["create services"],
    ) == (1, 1, 1)
    assert calls.keys() <= {
        "dry-run pods",
        "create services",
        "patch multigpujobs/status",
        "create events",
    }


async def test_pod_counts_alone_are_written_at_most_every_few_seconds_and_never_lost() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(replicas=PODS))
        await asyncio.sleep(1)
        before = writes(cluster)["patch multigpujobs/status"]
        # Half the pods start, one a second: only the counts change (the job stays Pending).
        await start_pods(cluster, gap=1, count=PODS // 2)
        await asyncio.sleep(2 * COUNTS_WRITE_SECONDS)
        pods = cluster.status("train")["pods"]
        assert (pods["running"], pods["pending"]) == (PODS // 2, PODS // 2)
        held = writes(cluster)["patch multigpujobs/status"] - before
        # 4 s of changes: at most one write per COUNTS_WRITE_SECONDS, and the last counts.
        assert held <= 2
        assert cluster.status("train")["phase"] == "Pending"


async def test_a_created_pod_is_awaited_until_the_watch_brings_it_or_it_is_long_overdue() -> None:
    cluster = FakeCluster()
    informer = PodInformer(cluster, lambda _key: None, "ns")
    key = ("ns", "train")
    informer.created(key, "train-0")
    informer.created(key, "train-1")
    assert informer.unseen(key) == {"train-0", "train-1"}
    # The watch brings train-0: no longer awaited. train-1 never comes (created and
    # deleted while the watch was down): after a while it may be created again.
    cluster.add_job("train", ddp_spec(replicas=1))
    job = cluster.jobs["ns", "train"]
    owner = {"uid": job["metadata"]["uid"], "controller": True}
    labels = {LABEL_JOB_NAME: "train"}
    pod = {"metadata": {"name": "train-0", "labels": labels, "ownerReferences": [owner]}}
    await cluster.create(kinds.PODS, "ns", pod)
    await informer.reflector.relist()
    assert informer.unseen(key) == {"train-1"}
    await asyncio.sleep(PodInformer.EXPECTATION_SECONDS + 1)
    assert informer.unseen(key) == set()


async def test_a_pod_deleted_for_a_fault_is_kept_as_last_seen_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    informer = PodInformer(FakeCluster(), lambda _key: None, "ns")
    key = ("ns", "train")

    def pod(name: str, conditions: list[dict[str, str]]) -> dict[str, Any]:
        meta = {"name": name, "namespace": "ns", "labels": {LABEL_JOB_NAME: "train"}}
        return {"metadata": meta, "status": {"phase": "Failed", "conditions": conditions}}

    collected = pod("train-1", [{"type": "DisruptionTarget", "status": "True"}])
    informer.apply("ADDED", collected)
    informer.apply("DELETED", collected)
    # A pod deleted by its job (no disruption) is not kept: thousands may go at once.
    plain = pod("train-0", [])
    informer.apply("ADDED", plain)
    informer.apply("DELETED", plain)
    assert informer.pods_of(key) == []
    assert informer.gone_of(key) == [collected]
    monkeypatch.setattr(PodInformer, "GONE_SECONDS", -1.0)
    assert informer.gone_of(key) == []

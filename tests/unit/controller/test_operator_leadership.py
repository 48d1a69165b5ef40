"""The election wired into the operator: settings, a controller whose caches run while only
a leader's workers reconcile, and /readyz telling a healthy standby from a broken one."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import aiohttp
import pytest
from unit.controller.test_election import MemoryLease

from multigpu_operator import metrics
from multigpu_operator.controller.workers import Controller
from multigpu_operator.election.elector import LeaderElector
from multigpu_operator.election.lease_rules import LeaseTimings
from multigpu_operator.handlers import readiness
from multigpu_operator.settings import Settings
from support.fake_cluster import FakeCluster

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
SPEC = {
    "mode": "DistributedDataParallel",
    "replicas": 2,
    "template": {"spec": {"containers": [{"name": "trainer", "image": "train:1"}]}},
}

ELECTION_VARIABLES = (
    "MGJ_LEADER_ELECTION",
    "MGJ_LEASE_NAME",
    "MGJ_LEASE_NAMESPACE",
    "MGJ_LEASE_DURATION_SECONDS",
    "MGJ_RENEW_DEADLINE_SECONDS",
    "MGJ_RETRY_PERIOD_SECONDS",
)


def test_settings_read_the_election_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MGJ_NAMESPACE", *ELECTION_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    assert Settings.from_env().leader_election is True
    assert Settings.from_env().lease_namespace == "default"
    monkeypatch.setenv("MGJ_NAMESPACE", "ml")
    assert Settings.from_env().lease_namespace == "ml"  # a process watching one namespace
    for name, value in {
        "MGJ_LEADER_ELECTION": "false",
        "MGJ_LEASE_NAME": "ops-lease",
        "MGJ_LEASE_NAMESPACE": "ops",
        "MGJ_LEASE_DURATION_SECONDS": "20",
        "MGJ_RENEW_DEADLINE_SECONDS": "15",
        "MGJ_RETRY_PERIOD_SECONDS": "5",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()
    assert (settings.leader_election, settings.lease_name, settings.lease_namespace) == (
        False,
        "ops-lease",
        "ops",
    )
    assert settings.lease_timings == LeaseTimings(20, 15, 5)
    monkeypatch.setenv("MGJ_RENEW_DEADLINE_SECONDS", "25")
    with pytest.raises(ValueError, match="lease duration > renew deadline"):
        Settings.from_env()


def controller(cluster: FakeCluster) -> Controller:
    made = Controller(cluster, Settings(workers=2), clock=lambda: T0)
    cluster.on_job_event = made.job_event
    return made


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_standby_caches_jobs_and_reconciles_them_once_its_workers_start() -> None:
    cluster = FakeCluster()
    standby = controller(cluster)
    await standby.start(reconcile=False)
    try:
        cluster.add_job("train", SPEC)
        await asyncio.sleep(30)
        assert ("ns", "train") in standby.jobs  # the caches are warm
        assert cluster.pod_names() == set()  # but nothing was reconciled
        standby.start_workers()  # it became the leader
        await asyncio.sleep(1)
        assert cluster.pod_names() == {"train-0", "train-1"}
        await standby.stop_workers()  # leadership lost
        cluster.add_job("late", SPEC)
        await asyncio.sleep(30)
        assert cluster.pod_names() == {"train-0", "train-1"}
    finally:
        await standby.stop()


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_ready_means_synced_caches_and_a_recent_answer_about_the_lease() -> None:
    cluster = FakeCluster()
    replica = controller(cluster)
    lease = MemoryLease()
    loop = asyncio.get_running_loop()
    elector = LeaderElector(lease.store("b"), "b", LeaseTimings(), monotonic=loop.time)
    assert readiness(replica, None) == "the pod and Service caches are not synced yet"
    await replica.start(reconcile=False)
    try:
        await asyncio.sleep(1)
        assert readiness(replica, None) is None  # no election: synced is enough
        assert readiness(replica, elector) == "the Lease has not been read yet"
        await elector.acquire()
        assert readiness(replica, elector) is None
        lease.down.add("b")  # the API server stops answering
        await asyncio.sleep(11)
        problem = readiness(replica, elector)
        assert problem == "no answer from the API server about the Lease for 11s"
    finally:
        await replica.stop()


@pytest.mark.asyncio
async def test_readyz_answers_503_with_the_reason_and_200_when_ready() -> None:
    problem: list[str] = ["the Lease has not been read yet"]
    runner = await metrics.serve(0, lambda: problem[0] if problem else None)
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert (response.status, await response.text()) == (503, problem[0])
            problem.clear()
            async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert (response.status, await response.text()) == (200, "ok")
    finally:
        await runner.cleanup()

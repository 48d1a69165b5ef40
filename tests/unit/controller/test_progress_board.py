"""Reading the jobs' progress (controller/progress_board.py) through the controller on
an in-memory cluster, whose pods' training processes are support/fake_processes.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from multigpu_operator.policy.training import TrainingReport
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster
from support.fake_processes import FakeProcesses

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]
PORT = 9300  # the operator's default MGJ_TRAINER_METRICS_PORT


def start(cluster: FakeCluster, name: str, replicas: int = 2, **spec: Any) -> list[str]:
    """Job `name`'s pods running, pod i at IP 10.<job>.0.i; returns the IPs."""
    ips = [f"10.{len(cluster.jobs)}.0.{i}" for i in range(replicas)]
    for i, ip in enumerate(ips):
        cluster.set_phase(f"{name}-{i}", "Running", pod_ip=ip)
    return ips


def maybe(controller: Any, name: str) -> TrainingReport | None:
    result: TrainingReport | None = controller.progress.report(("ns", name))
    return result


def report(controller: Any, name: str) -> TrainingReport:
    result = maybe(controller, name)
    assert result is not None, f"nothing read of {name}"
    return result


def shown(cluster: FakeCluster, name: str) -> dict[str, Any]:
    """The job's status.progress as written."""
    return dict(cluster.status(name).get("progress") or {})


def status_writes(cluster: FakeCluster) -> int:
    return len(cluster.calls_of("patch multigpujobs/status"))


async def test_replica_0_is_read_and_each_new_step_written_once_per_turn() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    async with running_controller(cluster, reader=processes):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        ips = start(cluster, "train")
        processes.at_step(ips[0], PORT, 10, total_steps=100, step_seconds=0.5)
        await asyncio.sleep(16)  # one reading round after the job runs
        first = shown(cluster, "train")
        assert (first["step"], first["totalSteps"], first["summary"]) == (10, 100, "10%")
        assert first["eta"] == "45s"  # 90 steps of 0.5 s
        assert {ip for ip, _ in processes.reads} == {ips[0]}  # replica 0 alone
        writes = status_writes(cluster)
        await asyncio.sleep(30)
        assert status_writes(cluster) == writes  # no new step: no write
        processes.at_step(ips[0], PORT, 20)
        await asyncio.sleep(15)
        assert shown(cluster, "train")["step"] == 20
        assert status_writes(cluster) == writes + 1


async def test_the_write_budget_serves_the_jobs_shown_longest_ago_first() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    # 0.2 writes/s: three jobs per 15 s round.
    async with running_controller(cluster, reader=processes, progress_writes_per_second=0.2):
        names = [f"j{i}" for i in range(5)]
        for name in names:
            cluster.add_job(name, ddp_spec(replicas=1))
        await asyncio.sleep(1)
        for name in names:
            processes.at_step(start(cluster, name, replicas=1)[0], PORT, 1)
        await asyncio.sleep(16)
        first = {n for n in names if shown(cluster, n)}
        await asyncio.sleep(15)
        second = {n for n in names if shown(cluster, n)}
    assert len(first) == 3
    assert second == set(names)


async def test_a_step_standing_still_reads_every_process_naming_the_silent_ones() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    async with running_controller(cluster, reader=processes) as controller:
        # Two pods of two GPUs: a process per GPU, ports 9300 and 9301 in each pod.
        cluster.add_job("train", ddp_spec(gpusPerReplica=2))
        await asyncio.sleep(1)
        ips = start(cluster, "train")
        for ip in ips:
            for port in (PORT, PORT + 1):
                processes.at_step(ip, port, 50)
        await asyncio.sleep(16)
        assert report(controller, "train").processes == ()
        processes.frozen.add((ips[1], PORT + 1))
        await asyncio.sleep(31)  # rounds without a new step
        stalled = report(controller, "train")
    assert stalled.step == 50
    assert [(p.rank, p.pod, p.answered) for p in stalled.processes] == [
        (0, "train-0", True),
        (1, "train-0", True),
        (2, "train-1", True),
        (3, "train-1", False),
    ]
    assert (stalled.last_change - stalled.read_at).total_seconds() <= -30


async def test_a_checkpoint_begun_is_a_change_and_a_long_one_has_every_process_read() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    async with running_controller(cluster, reader=processes) as controller:
        cluster.add_job("train", ddp_spec(replicas=1))
        await asyncio.sleep(1)
        ip = start(cluster, "train", replicas=1)[0]
        processes.at_step(ip, PORT, 7)
        await asyncio.sleep(16)
        seen = report(controller, "train")
        processes.at_step(ip, PORT, 7, checkpointing=1)
        await asyncio.sleep(60)
        saving = report(controller, "train")
    assert saving.checkpointing
    assert saving.last_change > seen.last_change
    # The checkpoint's start, not every read while it lasts; past a read, every process
    # is read, so that a rank missing from it would be named.
    assert (saving.read_at - saving.last_change).total_seconds() >= 30
    assert [(p.rank, p.checkpointing) for p in saving.processes] == [(0, True)]


async def test_a_job_that_serves_no_metrics_is_not_read() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    off = {"name": "MGJ_TRAINER_METRICS_PORT", "value": "0"}
    template = {"spec": {"containers": [{"name": "trainer", "image": "t:1", "env": [off]}]}}
    async with running_controller(cluster, reader=processes) as controller:
        cluster.add_job("train", ddp_spec(template=template))
        await asyncio.sleep(1)
        start(cluster, "train")
        await asyncio.sleep(60)
        assert maybe(controller, "train") is None
    assert processes.reads == []


async def test_a_job_that_reports_nothing_has_no_report() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    async with running_controller(cluster, reader=processes) as controller:
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        start(cluster, "train")
        await asyncio.sleep(60)
        assert maybe(controller, "train") is None
    assert processes.reads  # it was asked, every round

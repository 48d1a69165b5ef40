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


async def test_replica_0_is_read_and_each_new_step_published_once_per_turn() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    async with running_controller(cluster, reader=processes) as controller:
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        ips = start(cluster, "train")
        processes.at_step(ips[0], PORT, 10, total_steps=100, samples_per_second=512.0)
        await asyncio.sleep(16)  # one reading round after the job runs
        first = report(controller, "train")
        assert (first.step, first.total_steps, first.samples_per_second) == (10, 100, 512.0)
        assert first.publish
        again = report(controller, "train")
        assert not again.publish  # one turn, one write
        assert {ip for ip, _ in processes.reads} == {ips[0]}  # replica 0 alone
        await asyncio.sleep(15)
        assert not report(controller, "train").publish  # no new step
        processes.at_step(ips[0], PORT, 20)
        await asyncio.sleep(15)
        moved = report(controller, "train")
        assert (moved.publish, moved.step) == (True, 20)


async def test_the_write_budget_serves_the_jobs_shown_longest_ago_first() -> None:
    cluster, processes = FakeCluster(), FakeProcesses()
    # 0.2 writes/s: three jobs per 15 s round.
    async with running_controller(
        cluster, reader=processes, progress_writes_per_second=0.2
    ) as controller:
        names = [f"j{i}" for i in range(5)]
        for name in names:
            cluster.add_job(name, ddp_spec(replicas=1))
        await asyncio.sleep(1)
        for name in names:
            processes.at_step(start(cluster, name, replicas=1)[0], PORT, 1)
        await asyncio.sleep(16)
        first = {n for n in names if report(controller, n).publish}
        await asyncio.sleep(15)
        second = {n for n in names if report(controller, n).publish}
    assert len(first) == 3
    assert second == set(names) - first


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
        await asyncio.sleep(31)  # two rounds without a new step
        stalled = report(controller, "train")
    assert stalled.step == 50
    assert [(p.rank, p.pod, p.answered) for p in stalled.processes] == [
        (0, "train-0", True),
        (1, "train-0", True),
        (2, "train-1", True),
        (3, "train-1", False),
    ]
    assert (stalled.last_change - stalled.read_at).total_seconds() <= -30


async def test_a_checkpoint_being_written_is_a_change() -> None:
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
    assert saving.processes == ()  # not standing still: no process is read beyond replica 0


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

"""Benchmark: what showing progress costs at many running jobs (docs/benchmarks.md).

Not a test: it prints figures, never asserts on time. The operator's controller (the real
one: progress board, passes, actuator) runs against the in-memory API server of the unit
tests (tests/support/fake_cluster.py), `--jobs` one-pod jobs running; every pod's process
is one real HTTP endpoint in a child process, whose step moves all the time (the costliest
case: every job has news every round). Measured over `--rounds` reading rounds (15 s
each), after one warm-up round:

    .venv/bin/python tests/bench/bench_progress.py [--jobs 1000] [--rounds 4]

It prints the API requests per second (status writes for progress; nothing else happens
to the jobs), the reads per second of the processes, and the operator's CPU (this
process's, which includes the in-memory API server), against the same jobs with progress
turned off (MGJ_TRAINER_METRICS_PORT=0) in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multigpu_operator.cluster.process_metrics import ProcessMetrics
from multigpu_operator.controller.workers import Controller
from multigpu_operator.local.host import free_port
from multigpu_operator.policy import training
from multigpu_operator.settings import Settings
from support.fake_cluster import FakeCluster

# The child process: prometheus_client serving the progress gauges, the step moving with
# time, as a trainer at 10 steps/s would.
SERVER = f"""
import sys, time
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

class Progress:
    def collect(self):
        step = int(time.time() * 10) % 1_000_000
        for name, value in (
            ({training.STEP!r}, step), ({training.TOTAL_STEPS!r}, 1_000_000),
            ({training.EPOCH!r}, 0), ({training.SAMPLES_PER_SECOND!r}, 640.0),
            ({training.STEP_SECONDS!r}, 0.1), ({training.CHECKPOINTING!r}, 0),
        ):
            family = GaugeMetricFamily(name, name, labels=["job", "rank"])
            family.add_metric(["bench", "0"], value)
            yield family

registry = CollectorRegistry(auto_describe=True)  # indexed by name: name[] finds it
registry.register(Progress())
start_http_server(int(sys.argv[1]), addr="127.0.0.1", registry=registry)
time.sleep(10**6)
"""


ROUND = training.PROGRESS_READ_SECONDS


class Counted:
    """The operator's reader, counting its reads."""

    def __init__(self, reader: ProcessMetrics) -> None:
        self.reader, self.reads = reader, 0

    async def read(self, ip: str, port: int) -> dict[str, float] | None:
        self.reads += 1
        return await self.reader.read(ip, port)

    async def close(self) -> None:
        await self.reader.close()


def spec(port: int) -> dict[str, Any]:
    env = [{"name": "MGJ_TRAINER_METRICS_PORT", "value": str(port)}]
    container = {"name": "trainer", "image": "train:1", "env": env}
    return {
        "mode": "DistributedDataParallel",
        "replicas": 1,
        "template": {"spec": {"containers": [container]}},
    }


async def measure(jobs: int, rounds: int, port: int) -> dict[str, float]:
    """Requests/s, reads/s and CPU share of `jobs` running jobs over `rounds` rounds."""
    cluster = FakeCluster()
    reader = Counted(ProcessMetrics())
    controller = Controller(cluster, Settings(workers=32, kueue="off"), reader=reader)
    cluster.on_job_event = controller.job_event
    await controller.start()
    try:
        for i in range(jobs):
            cluster.add_job(f"j{i}", spec(port))
        for _ in range(1200):  # until every job's pod is created
            if len(cluster.pods) >= jobs:
                break
            await asyncio.sleep(0.5)
        for i in range(jobs):
            cluster.set_phase(f"j{i}-0", "Running", pod_ip="127.0.0.1")
        await asyncio.sleep(training.PROGRESS_READ_SECONDS + 5)  # running, one round read
        calls, reader.reads = len(cluster.calls), 0
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(rounds * training.PROGRESS_READ_SECONDS)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        requests = len(cluster.calls) - calls
    finally:
        await controller.stop()
    return {"requests/s": requests / wall, "reads/s": reader.reads / wall, "cpu": cpu / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    try:
        time.sleep(1)
        print(f"{args.jobs} running jobs, {args.rounds} rounds of {ROUND:.0f} s", flush=True)
        on = asyncio.run(measure(args.jobs, args.rounds, port))
        show("progress on ", on)
        off = asyncio.run(measure(args.jobs, args.rounds, 0))
        show("progress off", off)
    finally:
        server.kill()
    print(f"  CPU on - off: {(on['cpu'] - off['cpu']) * 100:.1f}% of a core")


def show(label: str, figures: dict[str, float]) -> None:
    print(
        f"  {label}: {figures['requests/s']:6.2f} API requests/s, "
        f"{figures['reads/s']:6.1f} process reads/s, "
        f"operator CPU {figures['cpu'] * 100:5.1f}% of a core",
        flush=True,
    )


if __name__ == "__main__":
    main()

"""The progress a live trainer serves, read as the operator reads it: the step and total
during and after training, the checkpointing flag on every rank of a save, and a resumed
run's step continuing from its checkpoint's.

The trainers run through training.workers.paused, which stops each process at chosen
moments (a sample read, a checkpoint write, the end) until the test has read it.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from multigpu_operator.policy import training
from training import procs

BATCH = 8
# 256 samples: 2 ranks of 8 take 16 steps an epoch, one process 32.
FLAGS = [
    "--dataset", "synthetic", "--synthetic-samples", "256", "--synthetic-shape", "1,8,8",
    "--classes", "4", "--batch-size", str(BATCH),
]  # fmt: skip


def scrape(port: int) -> dict[str, float]:
    """The progress gauges of the process on ``port``, through the ``name[]`` filter."""
    query = "&".join(f"name[]={name}" for name in training.GAUGES)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics?{query}", timeout=5) as got:
        text = got.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def progress(port: int) -> tuple[float, ...]:
    """(step, total, epoch, checkpointing, resumed step)."""
    found = scrape(port)
    names = (
        training.STEP,
        training.TOTAL_STEPS,
        training.EPOCH,
        training.CHECKPOINTING,
        training.RESUMED_STEP,
    )
    return tuple(found[name] for name in names)


class Job:
    """The processes of one run, each with its own metrics port (they share a host)."""

    def __init__(self, tmp_path: Path, world: int, flags: list[str], env: Mapping[str, str]):
        self.dir = tmp_path / "pauses"
        self.dir.mkdir(exist_ok=True)
        self.ports = [procs.free_port() for _ in range(world)]
        master = procs.free_port()
        self.procs = [
            procs.start(
                "training.workers.paused",
                ["multigpu_train.ddp", *FLAGS, *flags],
                procs.rank_env(
                    rank,
                    world,
                    master,
                    {
                        "PAUSE_DIR": str(self.dir),
                        "MGJ_TRAINER_METRICS_PORT": str(self.ports[rank]),
                        "MGJ_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
                        **env,
                    },
                ),
            )
            for rank in range(world)
        ]

    def paused(self, rank: int, name: str, timeout: float = 120) -> None:
        marker = self.dir / f"rank{rank}-{name}.paused"
        deadline = time.monotonic() + timeout
        while not marker.exists():
            proc = self.procs[rank]
            if proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                out = "\n".join(p.communicate()[0][-3000:] for p in self.procs)
                raise AssertionError(f"rank {rank} never reached {name}:\n{out}")
            time.sleep(0.1)

    def go(self, rank: int, name: str) -> None:
        (self.dir / f"rank{rank}-{name}.go").touch()

    def until(self, rank: int, expected: tuple[float, ...], timeout: float = 30) -> None:
        """The rank's progress becomes ``expected`` (a rank not paused may lag a moment)."""
        deadline = time.monotonic() + timeout
        while (seen := progress(self.ports[rank])) != expected:
            assert time.monotonic() < deadline, f"rank {rank}: {seen}, not {expected}"
            time.sleep(0.1)

    def finish(self) -> None:
        for proc in self.procs:
            procs.finish(proc, 120).check()

    def kill(self) -> None:
        for proc in self.procs:
            proc.kill()


def test_two_ranks_report_steps_total_and_checkpoints(tmp_path: Path) -> None:
    flags = ["--epochs", "1", "--checkpoint-every-steps", "4"]
    job = Job(
        tmp_path,
        2,
        flags,
        {"PAUSE_AT_SAVES": "1", "PAUSE_AT_READS": str(6 * BATCH), "PAUSE_AT_EXIT": "1"},
    )
    try:
        # Rank 0 writes its first checkpoint, after 4 steps; rank 1 waits for it at the
        # barrier: both say they are checkpointing.
        job.paused(0, "save1")
        job.until(0, (4, 16, 0, 1, 0))
        job.until(1, (4, 16, 0, 1, 0))
        job.go(0, "save1")
        for rank in (0, 1):
            job.paused(rank, f"read{6 * BATCH}")
            # Both stop reading step 7's batch, 6 steps done.
            job.until(rank, (6, 16, 0, 0, 0))
        job.go(0, f"read{6 * BATCH}")
        job.go(1, f"read{6 * BATCH}")
        for rank in (0, 1):
            job.paused(rank, "exit")
            job.until(rank, (16, 16, 0, 0, 0))
            job.go(rank, "exit")
        job.finish()
    finally:
        job.kill()


def test_a_resumed_run_continues_from_the_checkpoints_step(tmp_path: Path) -> None:
    # One process, 32 steps an epoch, a checkpoint every 4: killed 2 steps after the
    # checkpoint at step 36 (epoch 1, sample 32), the run resumes at 36.
    flags = ["--epochs", "2", "--checkpoint-every-steps", "4"]
    killed_at = 38 * BATCH
    first = Job(tmp_path, 1, flags, {"PAUSE_AT_READS": str(killed_at)})
    try:
        first.paused(0, f"read{killed_at}")
        first.until(0, (38, 64, 1, 0, 0))
    finally:
        first.kill()
    first.procs[0].communicate()

    # The resumed process reads from sample 32 of epoch 1 on: its read 8 x 8 is step 44.
    again = Job(tmp_path, 1, flags, {"PAUSE_AT_READS": str(8 * BATCH), "PAUSE_AT_EXIT": "1"})
    try:
        again.paused(0, f"read{8 * BATCH}")
        again.until(0, (44, 64, 1, 0, 36))
        again.go(0, f"read{8 * BATCH}")
        again.paused(0, "exit")
        again.until(0, (64, 64, 1, 0, 36))
        again.go(0, "exit")
        again.finish()
    finally:
        again.kill()


SCRIPT = """
import pathlib, sys, time

from multigpu_train import progress

pauses = pathlib.Path(sys.argv[1])


def pause(name):
    (pauses / f"{name}.paused").touch()
    while not (pauses / f"{name}.go").exists():
        time.sleep(0.05)


progress.resumed_at(100)
for step in range(101, 111):
    time.sleep(0.02)
    progress.report(step, total_steps=200, epoch=3, samples=4)
    if step == 105:
        with progress.checkpointing():
            pause("save")
pause("exit")
"""


def test_a_users_script_reports_through_the_helper(tmp_path: Path) -> None:
    """A plain ``python script.py``, as launcher Script runs it, from another directory."""
    script, pauses = tmp_path / "train.py", tmp_path / "pauses"
    script.write_text(SCRIPT)
    pauses.mkdir()
    port = procs.free_port()
    env = procs.rank_env(0, 1, procs.free_port(), {"MGJ_TRAINER_METRICS_PORT": str(port)})
    proc = subprocess.Popen(
        [sys.executable, str(script), str(pauses)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for name, expected in [("save", (105, 200, 3, 1, 100)), ("exit", (110, 200, 3, 0, 100))]:
            deadline = time.monotonic() + 60
            while not (pauses / f"{name}.paused").exists():
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, f"the script never reached {name}"
                time.sleep(0.05)
            assert progress(port) == expected
            found = scrape(port)
            # Steps of 20 ms or more, 4 samples each.
            assert found[training.STEP_SECONDS] >= 0.02
            assert 0 < found[training.SAMPLES_PER_SECOND] <= 4 / 0.02
            (pauses / f"{name}.go").touch()
        assert procs.finish(proc, 30).check()
    finally:
        proc.kill()

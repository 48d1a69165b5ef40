"""Measuring a resume's host memory per rank (tests/training/test_resume_memory.py
asserts it, tests/bench/bench_resume_memory.py records it): train one step with a
checkpoint, then resume in training.workers.resume_rss, which prints each rank's rise in
resident memory while it loads."""

from __future__ import annotations

from pathlib import Path

from multigpu_train import checkpoint, checkpoint_layout
from training import procs

RESUME_GOAL = 1.3

# About 6.3 M parameters: a checkpoint of about 75 MiB with Adam's two moments.
FLAGS = [
    "--dataset", "synthetic", "--synthetic-samples", "64", "--synthetic-shape", "1,8,8",
    "--model", "transformer", "--transformer-dim", "256", "--transformer-layers", "8",
    "--batch-size", "8", "--micro-batches", "2", "--epochs", "1", "--steps-per-epoch", "1",
]  # fmt: skip


def checkpoint_mib(directory: Path) -> float:
    """The size of the latest checkpoint: the file, or every rank's shards together."""
    name = checkpoint_layout.latest(directory)
    if name is None:
        return checkpoint.path_in(directory).stat().st_size / 2**20
    return sum(p.stat().st_size for p in (directory / name).iterdir()) / 2**20


def resume_growth_mib(
    directory: Path,
    ranks: int,
    module: str = "multigpu_train.pipeline",
    flags: list[str] = FLAGS,
) -> tuple[list[float], float]:
    """Each rank's rise in resident memory during the resume, and the checkpoint's size."""
    env = [{"MGJ_CHECKPOINT_DIR": str(directory)}] * ranks
    for done in procs.run_ranks(module, flags, ranks, per_rank=env):
        done.check()
    # The same --epochs: the job resumes at its end, and only scores the test split.
    again = procs.run_ranks("training.workers.resume_rss", [module, *flags], ranks, per_rank=env)
    grown = [done.check().floats(r"resume peak rss growth kib=(\d+)")[0] / 1024 for done in again]
    return grown, checkpoint_mib(directory)


def ddp_flags(sharding: str | None) -> list[str]:
    """The pipeline's flags but its micro-batches: the same 6.3 M-parameter transformer
    under the DDP entrypoint (`sharding` None: a trainer without the option)."""
    flags = [*FLAGS[: FLAGS.index("--micro-batches")], "--epochs", "1", "--steps-per-epoch", "1"]
    return flags if sharding is None else [*flags, "--sharding", sharding]

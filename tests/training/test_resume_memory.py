"""A resume's memory per rank: each pipeline stage receives only its share of the
checkpoint, so a rank's peak does not grow with the number of ranks (it once received
the whole checkpoint, every stage's optimizer state included, on every rank)."""

from __future__ import annotations

from pathlib import Path

from training import procs

# About 6.3 M parameters: a checkpoint of about 75 MiB with Adam's two moments.
FLAGS = [
    "--dataset", "synthetic", "--synthetic-samples", "64", "--synthetic-shape", "1,8,8",
    "--model", "transformer", "--transformer-dim", "256", "--transformer-layers", "8",
    "--batch-size", "8", "--micro-batches", "2", "--epochs", "1", "--steps-per-epoch", "1",
]  # fmt: skip


def resume_growth_mib(directory: Path, ranks: int) -> tuple[list[float], float]:
    """Each rank's rise in resident memory during the resume, and the checkpoint's size."""
    env = [{"MGJ_CHECKPOINT_DIR": str(directory)}] * ranks
    for done in procs.run_ranks("multigpu_train.pipeline", FLAGS, ranks, per_rank=env):
        done.check()
    size = (directory / "checkpoint.pt").stat().st_size / 2**20
    # The same --epochs: the job resumes at its end, and only scores the test split.
    again = procs.run_ranks(
        "training.workers.resume_rss", ["multigpu_train.pipeline", *FLAGS], ranks, per_rank=env
    )
    grown = [done.check().floats(r"resume peak rss growth kib=(\d+)")[0] / 1024 for done in again]
    return grown, size


def test_a_stage_receives_only_its_share_at_a_resume(tmp_path: Path) -> None:
    two, size = resume_growth_mib(tmp_path / "two", 2)
    four, _ = resume_growth_mib(tmp_path / "four", 4)
    print(f"checkpoint {size:.0f} MiB; resume peak growth per rank, MiB: 2 ranks {two}, 4 {four}")
    assert size > 50
    # Rank 0 reads the file for everyone and sends each stage its share: about the
    # same whatever the ranks. Every other rank holds only its share while it
    # unpickles it (seen here: about 2 x the checkpoint with 2 stages, 1 x with 4).
    assert four[0] <= two[0] + 8
    assert max(four[1:]) <= max(two[1:]) + 8
    # Not the whole checkpoint on every rank: the share shrinks as the stages grow.
    assert max(four[1:]) < 0.75 * max(two[1:])

"""DistributedDataParallel across 2 real processes (gloo on the CPU)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from training import procs
from training.workers.batch import digits_batch, model, reference_grads

MICRO_BATCH = 16


@pytest.mark.parametrize(
    ("accum_steps", "bucket_cap_mb", "as_view"),
    [
        pytest.param(1, 25.0, "1", id="one-batch"),
        # Tiny buckets: many all-reduces, each gradient in its own bucket.
        pytest.param(1, 0.01, "0", id="small-buckets-no-view"),
        # no_sync accumulation: 2 batches per rank, one all-reduce.
        pytest.param(2, 25.0, "1", id="accumulate-2"),
    ],
)
def test_gradients_equal_one_process_on_the_concatenated_batch(
    tmp_path: Path, accum_steps: int, bucket_cap_mb: float, as_view: str
) -> None:
    args = [str(tmp_path), str(accum_steps), str(MICRO_BATCH), str(bucket_cap_mb), as_view]
    for done in procs.run_ranks("training.workers.ddp_step", args, world=2):
        done.check()
    x, y = digits_batch(2 * accum_steps * MICRO_BATCH)
    _, expected = reference_grads(model(), x, y)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got.keys() == expected.keys()
        for name, grad in expected.items():
            torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_two_ranks_learn_digits_and_only_rank0_checkpoints(tmp_path: Path) -> None:
    # Each rank gets its own checkpoint directory, as pods without a shared volume
    # would: only rank 0's may be written, and resuming must not need rank 1's.
    dirs = [tmp_path / "rank0", tmp_path / "rank1"]
    per_rank = [{"MGJ_CHECKPOINT_DIR": str(d)} for d in dirs]
    runs = procs.run_ranks("multigpu_train.ddp", ["--epochs", "8"], 2, per_rank=per_rank)
    for done in runs:
        done.check()
        (accuracy,) = done.floats(r"final test_accuracy=([\d.]+)")
        assert accuracy >= 0.93, done.output[-3000:]
    assert (dirs[0] / "checkpoint.pt").is_file()
    assert not dirs[1].exists()
    assert not list(dirs[0].glob(".*tmp")), "a temporary checkpoint file was left behind"
    state = torch.load(dirs[0] / "checkpoint.pt", weights_only=True)
    assert state["epoch"] == 8
    assert state["world_size"] == 2
    assert state["sampler"] == {"seed": 0, "epoch": 8}

    again = procs.run_ranks("multigpu_train.ddp", ["--epochs", "9"], 2, per_rank=per_rank)
    for done in again:
        done.check()
        assert "resumed from epoch 8" in done.output
        assert re.findall(r"epoch (\d+)/9 done", done.output) == ["9"]


def test_restart_resumes_without_repeating_an_epoch(tmp_path: Path) -> None:
    env = procs.clean_env({"MGJ_CHECKPOINT_DIR": str(tmp_path), "MGJ_EPOCHS": "2"})
    first = procs.run("multigpu_train.ddp", [], env).check()
    assert re.findall(r"epoch (\d+)/2 done", first.output) == ["1", "2"]
    assert "resumed" not in first.output

    # The flag wins over MGJ_EPOCHS; the two finished epochs are not run again.
    second = procs.run("multigpu_train.ddp", ["--epochs", "3"], env).check()
    assert "resumed from epoch 2" in second.output
    assert re.findall(r"epoch (\d+)/3 done", second.output) == ["3"]

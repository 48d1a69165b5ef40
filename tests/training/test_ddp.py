"""DistributedDataParallel across 2 real processes (gloo on the CPU)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from training import procs
from training.workers.batch import digits_batch, model, reference_grads

MICRO_BATCH = 16


# name: (batches accumulated per step, bucket_cap_mb, gradient_as_bucket_view)
GRADIENT_CASES = {
    "one-batch": (1, 25.0, True),
    # Tiny buckets: many all-reduces, each gradient in its own bucket.
    "small-buckets-no-view": (1, 0.01, False),
    # no_sync accumulation: 2 batches per rank, one all-reduce.
    "accumulate-2": (2, 25.0, True),
}


@pytest.fixture(scope="module")
def ddp_gradients(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case's gradients from one 2-rank job (process start-up is the slow part)."""
    out = tmp_path_factory.mktemp("ddp-grads")
    cases = [f"{n}:{a}:{b}:{int(v)}" for n, (a, b, v) in GRADIENT_CASES.items()]
    for done in procs.run_ranks(
        "training.workers.ddp_step", [str(out), str(MICRO_BATCH), *cases], 2
    ):
        done.check()
    return out


@pytest.mark.parametrize("case", GRADIENT_CASES)
def test_gradients_equal_one_process_on_the_concatenated_batch(
    ddp_gradients: Path, case: str
) -> None:
    accum_steps = GRADIENT_CASES[case][0]
    x, y = digits_batch(2 * accum_steps * MICRO_BATCH)
    _, expected = reference_grads(model(), x, y)
    for rank in (0, 1):
        got = torch.load(ddp_gradients / f"{case}-rank{rank}.pt")
        assert got.keys() == expected.keys()
        for name, grad in expected.items():
            torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_two_ranks_learn_digits_and_only_rank0_checkpoints(tmp_path: Path) -> None:
    # Each rank gets its own checkpoint directory, as pods without a shared volume
    # would: only rank 0's may be written, and resuming must not need rank 1's.
    dirs = [tmp_path / "rank0", tmp_path / "rank1"]
    per_rank = [{"MGJ_CHECKPOINT_DIR": str(d)} for d in dirs]
    # Global batch 64 (32 per rank); 6 epochs at lr 0.005 reach about 0.96.
    flags = ["--lr", "0.005"]
    runs = procs.run_ranks("multigpu_train.ddp", [*flags, "--epochs", "6"], 2, per_rank=per_rank)
    for done in runs:
        done.check()
        (accuracy,) = done.floats(r"final test_accuracy=([\d.]+)")
        assert accuracy >= 0.93, done.output[-3000:]
    assert (dirs[0] / "checkpoint.pt").is_file()
    assert not dirs[1].exists()
    assert not list(dirs[0].glob(".*tmp")), "a temporary checkpoint file was left behind"
    state = torch.load(dirs[0] / "checkpoint.pt", weights_only=True)
    assert state["epoch"] == 6
    assert state["world_size"] == 2
    assert state["sampler"] == {"seed": 0, "epoch": 6}

    again = procs.run_ranks("multigpu_train.ddp", [*flags, "--epochs", "7"], 2, per_rank=per_rank)
    for done in again:
        done.check()
        assert re.search(r"\bresumed from epoch 6\b", done.output)
        assert re.findall(r"epoch (\d+)/7 done", done.output) == ["7"]

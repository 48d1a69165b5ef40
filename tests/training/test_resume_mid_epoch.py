"""Checkpoints within an epoch: a job that loses a rank midway trains no sample twice.

Each case kills rank 1 as it starts a step, after a checkpoint taken within the epoch,
then lets the job come back (restarted by hand, as the operator restarts pods, or by
torchrun) and checks, from the indices every process read, that the samples trained
before the checkpoint and those trained after the resume are each of the epoch's
samples exactly once. Steps between the checkpoint and the kill are lost with the
process: their samples count once, in the resumed run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from training import procs

SAMPLES, BATCH, EVERY = 384, 8, 4
# Rank 1 dies reading the first sample of its 13th step: after the checkpoint at 12
# steps of 2 ranks x 8 samples, so at position 192 of the epoch's order.
KILLED_AT_STEP = 12
POSITION = KILLED_AT_STEP * 2 * BATCH
FLAGS = [
    "--dataset", "synthetic", "--synthetic-samples", str(SAMPLES), "--synthetic-shape", "1,8,8",
    "--classes", "4", "--batch-size", str(BATCH), "--epochs", "1",
    "--checkpoint-every-steps", str(EVERY),
]  # fmt: skip


def env(tmp_path: Path, round_: int | None = None) -> dict[str, str]:
    return {
        "RECORD_DIR": str(tmp_path),
        "MGJ_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "KILL_RANK": "1",
        "KILL_AT": str(KILLED_AT_STEP * BATCH),
        **({"MGJ_TEST_ROUND": str(round_)} if round_ is not None else {}),
    }


def read(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


def assert_each_sample_trained_once(tmp_path: Path, ranks_after: int) -> None:
    committed_per_rank = POSITION // 2
    before = [read(tmp_path / f"round0-rank{r}.txt") for r in (0, 1)]
    # The killed rank read exactly the steps before it died; rank 0 may have read the
    # next batch before its all-reduce failed.
    assert len(before[1]) == committed_per_rank
    assert len(before[0]) >= committed_per_rank
    committed = [i for indices in before for i in indices[:committed_per_rank]]
    after = [i for r in range(ranks_after) for i in read(tmp_path / f"round1-rank{r}.txt")]
    assert len(after) == SAMPLES - POSITION
    assert sorted(committed + after) == list(range(SAMPLES))


@pytest.mark.parametrize("ranks_after", [2, 3], ids=["restarted", "rescaled-to-3"])
def test_ddp_job_resumes_mid_epoch(tmp_path: Path, ranks_after: int) -> None:
    module = ["training.workers.recorded", "multigpu_train.ddp"]
    first = procs.run_ranks(module[0], [module[1], *FLAGS], 2, per_rank=[env(tmp_path, 0)] * 2)
    assert first[1].returncode == -9, procs.excerpt(first[1].output)
    assert first[0].returncode != 0, "rank 0 cannot finish the epoch without rank 1"
    saved = re.findall(r"checkpoint saved: .* \(epoch 0 at sample (\d+)\)", first[0].output)
    assert saved == [str(n * 2 * BATCH) for n in (4, 8, 12)]

    again = procs.run_ranks(
        module[0], [module[1], *FLAGS], ranks_after, per_rank=[env(tmp_path, 1)] * ranks_after
    )
    for done in again:
        done.check()
        assert (
            f"resumed from epoch 0 at sample {POSITION} "
            f"(checkpoint of world size 2, now {ranks_after})"
        ) in done.output
    assert_each_sample_trained_once(tmp_path, ranks_after)


def test_elastic_job_resumes_mid_epoch_under_torchrun(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes=1:2", "--nproc-per-node=2", "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{procs.free_port()}", "--rdzv-id=test-mid-epoch",
        "--rdzv-conf=join_timeout=60,last_call_timeout=1",
        "--max-restarts=1", "--monitor-interval=0.2",
        "-m", "training.workers.recorded", "multigpu_train.ddp", *FLAGS,
    ]  # fmt: skip
    # What the operator sets for Elastic jobs (docs/env-contract.md).
    extra = {**env(tmp_path), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    done = subprocess.run(
        command, env=procs.clean_env(extra), capture_output=True, text=True, timeout=240
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, procs.excerpt(output)
    resumed = re.findall(r"resumed from epoch 0 at sample (\d+) .*now 2\)", output)
    assert resumed == [str(POSITION)] * 2, procs.excerpt(output)
    assert len(re.findall(r"restart=1 ", output)) == 2
    assert_each_sample_trained_once(tmp_path, 2)

"""A slow checkpoint write on rank 0 is waited for with its own timeout.

The other ranks wait at the checkpoint barrier (--checkpoint-timeout), not in the next
collective (--init-timeout, meant for peers that are gone). Here the write takes longer
than the collective timeout: the job trains on; with a checkpoint timeout shorter than
the write, the ranks fail with a message that names the setting.
"""

from __future__ import annotations

from pathlib import Path

from training import procs

COLLECTIVE_TIMEOUT_S = 8
SLOW_SAVE_S = 14
FLAGS = [
    "multigpu_train.ddp", "--dataset", "synthetic", "--synthetic-samples", "256",
    "--synthetic-shape", "1,8,8", "--epochs", "2", "--steps-per-epoch", "4",
]  # fmt: skip


def run(tmp_path: Path, checkpoint_timeout_s: int) -> list[procs.Finished]:
    env = {
        "MGJ_CHECKPOINT_DIR": str(tmp_path),
        "MGJ_INIT_TIMEOUT_SECONDS": str(COLLECTIVE_TIMEOUT_S),
        "MGJ_CHECKPOINT_TIMEOUT_SECONDS": str(checkpoint_timeout_s),
        "SLOW_SAVE_SECONDS": str(SLOW_SAVE_S),
    }
    return procs.run_ranks("training.workers.slow_checkpoint", FLAGS, 2, per_rank=[env] * 2)


def test_a_write_longer_than_the_collective_timeout_is_waited_for(tmp_path: Path) -> None:
    for done in run(tmp_path, checkpoint_timeout_s=120):
        done.check()
        assert "epoch 2/2 done" in done.output
    assert (tmp_path / "checkpoint.pt").is_file()


def test_a_write_longer_than_the_checkpoint_timeout_fails_clearly(tmp_path: Path) -> None:
    rank0, rank1 = run(tmp_path, checkpoint_timeout_s=4)
    assert rank1.returncode != 0
    assert (
        "the ranks did not meet after writing a checkpoint within --checkpoint-timeout 4 s "
        "(MGJ_CHECKPOINT_TIMEOUT_SECONDS)"
    ) in rank1.output, procs.excerpt(rank1.output)
    assert rank0.returncode != 0

"""A trainer entrypoint with every training sample it reads written down, and one rank
of the first round that kills itself midway through an epoch.

Usage: python -m training.workers.recorded MODULE [FLAGS...]  (MODULE: multigpu_train.ddp)

Environment:
- RECORD_DIR: each process appends the index of every training sample it reads, one a
  line, to ``round<R>-rank<RANK>.txt``; R is MGJ_TEST_ROUND, or torchrun's restart count.
- KILL_RANK, KILL_AT: in round 0, rank KILL_RANK sends itself SIGKILL as it is about to
  read its KILL_AT-th sample (counted from 0), before writing it down.

With no DataLoader workers (the default) samples are read in the training process, a
batch at a time just before its step, so the lines in order are the steps' samples.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

import torch
from torch.utils.data import Dataset

from multigpu_train import data
from multigpu_train.config import TrainConfig

Sample = tuple[torch.Tensor, ...]


class Recorded(Dataset[Sample]):
    def __init__(self, inner: Dataset[Sample], path: Path, kill_at: int | None) -> None:
        self.inner = inner
        self.path = path
        self.kill_at = kill_at
        self.read = 0

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Sample:
        if self.read == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        self.read += 1
        with self.path.open("a") as f:
            f.write(f"{index}\n")
        return self.inner[index]


def main() -> None:
    module, flags = sys.argv[1], sys.argv[2:]
    rank = int(os.environ.get("RANK", "0"))
    round_ = int(os.environ.get("MGJ_TEST_ROUND") or os.environ["TORCHELASTIC_RESTART_COUNT"])
    path = Path(os.environ["RECORD_DIR"]) / f"round{round_}-rank{rank}.txt"
    doomed = round_ == 0 and rank == int(os.environ.get("KILL_RANK", "-1"))
    kill_at = int(os.environ["KILL_AT"]) if doomed else None
    load = data.load

    def recorded_load(cfg: TrainConfig) -> data.Data:
        loaded = load(cfg)
        train = Recorded(loaded.train, path, kill_at)
        return data.Data(train, loaded.test, loaded.sample_shape, loaded.classes)

    data.load = recorded_load
    sys.argv = [module, *flags]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

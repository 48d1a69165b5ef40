"""A trainer entrypoint that stops at chosen moments until the test says go, so the test
can read its metrics endpoint there.

Usage: python -m training.workers.paused MODULE [FLAGS...]  (MODULE: multigpu_train.ddp)

Environment (PAUSE_DIR required, each moment optional):
- PAUSE_AT_READS: comma-separated counts: the process stops as it is about to read its
  N-th training sample (counted from 0), named ``read<N>``. With no DataLoader workers a
  batch is read just before its step, so at ``read<k x batch>`` k steps are done.
- PAUSE_AT_SAVES: comma-separated ordinals: rank 0 stops inside its N-th checkpoint
  write (from 1), before the file is written, named ``save<N>``.
- PAUSE_AT_EXIT: set: the process stops once training returned, named ``exit``.

At a moment the process creates ``PAUSE_DIR/rank<RANK>-<name>.paused`` and waits until
``rank<RANK>-<name>.go`` exists (at most 120 s).
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import torch
from torch.utils.data import Dataset

from multigpu_train import checkpoint, data, distributed
from multigpu_train.config import TrainConfig

Sample = tuple[torch.Tensor, ...]


def moments(name: str) -> set[int]:
    return {int(n) for n in os.environ.get(name, "").split(",") if n}


def pause_here(name: str) -> None:
    where = Path(os.environ["PAUSE_DIR"]) / f"rank{os.environ.get('RANK', '0')}-{name}"
    where.with_suffix(".paused").touch()
    deadline = time.monotonic() + 120
    while not where.with_suffix(".go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


class Paused(Dataset[Sample]):
    def __init__(self, inner: Dataset[Sample], at: set[int]) -> None:
        self.inner = inner
        self.at = at
        self.read = 0

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Sample:
        if self.read in self.at:
            pause_here(f"read{self.read}")
        self.read += 1
        return self.inner[index]


def main() -> None:
    module, flags = sys.argv[1], sys.argv[2:]
    reads, saves = moments("PAUSE_AT_READS"), moments("PAUSE_AT_SAVES")
    load, save, leave = data.load, checkpoint.save, distributed.exit_after_success
    written = [0]

    def paused_load(cfg: TrainConfig) -> data.Data:
        loaded = load(cfg)
        train = Paused(loaded.train, reads)
        return data.Data(train, loaded.test, loaded.sample_shape, loaded.classes)

    def paused_save(directory: Path, state: checkpoint.State) -> Path:
        written[0] += 1
        if written[0] in saves:
            pause_here(f"save{written[0]}")
        return save(directory, state)

    def paused_exit() -> NoReturn:
        if os.environ.get("PAUSE_AT_EXIT"):
            pause_here("exit")
        leave()

    data.load = paused_load
    checkpoint.save = paused_save
    replace: Callable[[], NoReturn] = paused_exit
    distributed.exit_after_success = replace
    sys.argv = [module, *flags]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

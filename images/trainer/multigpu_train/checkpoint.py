"""The whole-model checkpoint file: rank 0 alone reads and writes it, all or nothing.

The file holds the epoch to run (so a finished epoch is never repeated), the optimizer
steps done so far (the job's progress; older images wrote none), the model and
optimizer state, and the sampler's seed and epoch. A checkpoint written within an
epoch (``--checkpoint-every-steps``) also holds the sampler's position: how many
samples of that epoch's order were trained, so a resumed job trains only the rest. In
fp16 it holds the gradient scaler's state. Both keys appear only when they say
something: a checkpoint at an epoch's end in fp32 keeps the format of earlier images.
Rank 0 maps the file (``mmap``) rather than reading it whole; how the other ranks get
it is the CheckpointManager's part (checkpoint_manager.py). Sharded models use another
layout (checkpoint_layout.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from multigpu_train.checkpoint_layout import fsync_dir
from multigpu_train.steps import RankStage

log = logging.getLogger(__name__)

FILENAME = "checkpoint.pt"
State = dict[str, Any]


def path_in(directory: Path) -> Path:
    return directory / FILENAME


def leftovers(directory: Path) -> list[Path]:
    """Temporary files of writes that never finished (a process killed mid-write)."""
    return sorted(directory.glob(f".{FILENAME}.*.tmp")) if directory.is_dir() else []


def save(directory: Path, state: State) -> Path:
    """Write atomically: a crash mid-write leaves the previous checkpoint intact.

    The temporary file sits in the same directory, so os.replace is a rename on one
    file system; fsync makes the data durable before the rename makes it visible.
    Temporary files of earlier writes killed midway are removed first: only rank 0
    writes, so none of them is still being written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for stale in leftovers(directory):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    target = path_in(directory)
    tmp = directory / f".{FILENAME}.{os.getpid()}.tmp"
    try:
        with tmp.open("wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    # Makes the rename itself durable.
    fsync_dir(directory)
    return target


def load(directory: Path) -> State | None:
    target = path_in(directory)
    if not target.exists():
        return None
    # weights_only: a checkpoint is data, never code to run. mmap: pages are read as
    # they are used, and a stage's share touches only its own.
    state: State = torch.load(target, map_location="cpu", weights_only=True, mmap=True)
    return state


def make_state(
    *,
    epoch: int,
    model: State,
    optimizer: State | list[State],
    seed: int,
    world_size: int,
    step: int = 0,
    position: int = 0,
    grad_scaler: State | None = None,
) -> State:
    """The checkpoint; ``position``: samples of ``epoch``'s order already trained."""
    sampler: State = {"seed": seed, "epoch": epoch}
    if position:
        sampler["position"] = position
    state: State = {
        "epoch": epoch,
        "step": step,
        "model": model,
        "optimizer": optimizer,
        "sampler": sampler,
        "world_size": world_size,
        "saved_at": time.time(),
    }
    if grad_scaler:
        state["grad_scaler"] = grad_scaler
    return state


def position_of(state: State) -> int:
    """Samples of the checkpoint's epoch already trained (0 in older checkpoints)."""
    return int(state["sampler"].get("position", 0))


def step_of(state: State) -> int | None:
    """Optimizer steps done when the checkpoint was written; None in older checkpoints."""
    step = state.get("step")
    return None if step is None else int(step)


def optimizer_share(saved: State | list[State] | None, stage: RankStage | None) -> State | None:
    """This process's optimizer state (``stage``'s, or None: a whole model's) in a
    checkpoint's ``saved``, if it was written for this layout."""
    if stage is None:
        return saved if isinstance(saved, dict) else None
    if isinstance(saved, list) and len(saved) == stage.count:
        return saved[stage.index]
    return None


def on_cpu(value: Any) -> Any:
    """``value`` with every tensor in it copied to the CPU (dicts, lists, tuples walked).

    What one rank sends another must not name its GPU: the receiver would unpickle
    the tensors onto its own device of that index, a GPU of another process.
    """
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: on_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(on_cpu(item) for item in value)
    return value


def save_on_rank0(rank: int, directory: Path | None, state: State) -> float | None:
    """Rank 0 writes; other ranks return at once. The time written, or None."""
    if rank != 0 or directory is None:
        return None
    target = save(directory, state)
    log_saved(target, state)
    saved_at: float = state["saved_at"]
    return saved_at


def log_saved(target: Path, state: State) -> None:
    """The line a script or test can rely on (docs/training.md)."""
    position = position_of(state)
    if position:
        log.info("checkpoint saved: %s (epoch %d at sample %d)", target, state["epoch"], position)
    else:
        log.info("checkpoint saved: %s (next epoch %d)", target, state["epoch"])


def load_on_rank0(directory: Path | None, rank: int) -> State | None:
    """Rank 0 reads the checkpoint (onto the CPU); other ranks get None."""
    return load(directory) if rank == 0 and directory is not None else None


def stage_share(state: State, names: list[str], index: int, count: int) -> State:
    """What pipeline stage ``index`` of ``count`` needs of ``state``: the weights named
    ``names``, and its own optimizer state when the checkpoint was written by as many
    stages (the other stages' entries left empty); the rest is small and sent whole."""
    weights = state["model"]
    saved = state["optimizer"]
    optimizer: list[State] | None = None
    if isinstance(saved, list) and len(saved) == count:
        optimizer = [saved[i] if i == index else {} for i in range(count)]
    return {
        **state,
        "model": {name: weights[name] for name in names if name in weights},
        "optimizer": optimizer,
    }

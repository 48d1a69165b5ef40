"""Checkpoints as a component beside the Trainer (torchtitan's CheckpointManager): what
is saved of a training, where, by which ranks, and how a restarted job gets it back.

Two layouts, by how the model is held:

- A whole model on each rank (DDP, DataParallel, a pipeline): one file,
  ``checkpoint.pt`` (checkpoint.py), written by rank 0 alone. At a resume rank 0 maps
  it and sends it to the other ranks tensor by tensor into their model and optimizer
  (state_broadcast.py); a pipeline's stages each receive only their share
  (whole_checkpoint.py).
- A sharded model (``--sharding full|hybrid``): DCP step directories and a ``latest``
  pointer (checkpoint_layout.py, sharded_checkpoint.py). Every rank writes and reads its
  own shards, so every rank must mount the volume.

The Trainer holds the progress (epoch, position, seed, optimizer steps); the manager
reads and sets it. The other ranks wait for rank 0's reads and writes at the
checkpoint barrier, whose timeout is ``--checkpoint-timeout``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from multigpu_train import checkpoint, sharding, whole_checkpoint
from multigpu_train import checkpoint_layout as layout
from multigpu_train import sharded_checkpoint as sharded
from multigpu_train.step_count import StepCount
from multigpu_train.steps import Step

if TYPE_CHECKING:
    from multigpu_train.trainer import Run

log = logging.getLogger(__name__)


class Checkpointed(Protocol):
    """What the manager saves and restores: a Trainer."""

    run: Run
    model: nn.Module
    step: Step
    optimizer: torch.optim.Optimizer
    epoch: int
    position: int
    seed: int
    count: StepCount


class CheckpointManager:
    """Saves ``trainer`` to ``--checkpoint-dir`` and resumes it from there."""

    def __init__(self, trainer: Checkpointed) -> None:
        self.trainer = trainer

    @property
    def directory(self) -> Path | None:
        return self.trainer.run.cfg.checkpoint_dir

    @property
    def sharded(self) -> bool:
        return sharding.is_sharded(self.trainer.model)

    def progress(self) -> checkpoint.State:
        """The checkpoint's keys but the model and optimizer."""
        t = self.trainer
        state = checkpoint.make_state(
            epoch=t.epoch,
            model={},
            optimizer={},
            seed=t.seed,
            world_size=t.run.world.world_size,
            step=t.count.done,
            position=t.position,
            # Equal on every stage of a pipeline: their scalers skip steps together.
            grad_scaler=t.step.precision.state_dict(),
        )
        del state["model"], state["optimizer"]
        return state

    def state_dict(self) -> checkpoint.State | None:
        """The whole-model checkpoint as rank 0 writes it; None on other ranks."""
        return whole_checkpoint.state_dict(self)

    def load_state_dict(self, state: checkpoint.State) -> None:
        """Continue where a whole-model checkpoint ``state`` stopped."""
        whole_checkpoint.load_state_dict(self, state)

    def load_progress(self, state: checkpoint.State) -> None:
        t = self.trainer
        t.step.precision.load_state_dict(state.get("grad_scaler"))
        t.epoch = int(state["epoch"])
        t.position = checkpoint.position_of(state)
        t.seed = int(state["sampler"]["seed"])
        t.count.loaded(checkpoint.step_of(state))

    # -- resume and save -----------------------------------------------------------

    def resume(self) -> None:
        """Load the latest checkpoint, when there is one. Every rank must call it."""
        if self.directory is None:
            return
        t = self.trainer
        with t.run.metrics.progress.checkpointing():  # the others' waits too
            state = self._resume_sharded() if self.sharded else whole_checkpoint.resume(self)
        if state is None:
            return
        t.run.metrics.checkpointed(float(state["saved_at"]))
        log.info(
            "resumed from epoch %d%s (checkpoint of world size %d, now %d)",
            t.epoch,
            f" at sample {t.position}" if t.position else "",
            state["world_size"],
            t.run.world.world_size,
        )

    def _resume_sharded(self) -> dict[str, Any] | None:
        """Every rank reads its shards of the latest complete checkpoint (resharded by
        DCP when the world size changed)."""
        t = self.trainer
        directory, barrier = self.directory, t.run.barrier
        assert directory is not None
        name: str | None = barrier.broadcast(
            layout.latest(directory) if t.run.world.rank == 0 else None
        )
        if name is None:
            if checkpoint.path_in(directory).exists():
                raise RuntimeError(
                    f"{checkpoint.path_in(directory)} was written by an unsharded run; a "
                    "sharded run (--sharding) reads only sharded checkpoints: give it another "
                    "--checkpoint-dir, or resume with --sharding none"
                )
            return None
        path = directory / name
        progress = layout.read_progress(path)
        sharded.load(path, t.model, t.optimizer, barrier.group)
        self.load_progress(progress)
        return progress

    def save(self) -> None:
        """Write a checkpoint; every rank returns once it is complete. Every rank must
        call it, with the same ``--checkpoint-dir`` set or unset. The others wait at
        the checkpoint barrier, not in the next collective, whose timeout is meant for
        peers that died."""
        if self.directory is None:
            return
        t = self.trainer
        with t.run.metrics.progress.checkpointing():  # the others' waits too
            saved = self._save_sharded() if self.sharded else whole_checkpoint.save(self)
            if saved is not None:
                t.run.metrics.checkpointed(saved)
            t.run.barrier.wait("writing")

    def _save_sharded(self) -> float | None:
        """Rank 0 clears what interrupted saves left and names a fresh step directory;
        every rank writes its shards there; rank 0 then adds the progress, publishes it
        as the latest and removes the checkpoint before it."""
        t = self.trainer
        directory, barrier = self.directory, t.run.barrier
        assert directory is not None
        rank0 = t.run.world.rank == 0
        name = None
        if rank0:
            layout.remove_leftovers(directory)
            name = layout.fresh_name(directory, t.count.done)
        name = barrier.broadcast(name)
        path = directory / name
        sharded.save(path, t.model, t.optimizer, barrier.group)
        if not rank0:
            return None
        progress = {**self.progress(), "saved_at": time.time()}
        layout.write_progress(path, progress)
        layout.publish(directory, name)
        layout.remove_leftovers(directory)
        checkpoint.log_saved(path, progress)
        saved_at: float = progress["saved_at"]
        return saved_at

"""Checkpoints as a component beside the Trainer (torchtitan's CheckpointManager): what
is saved of a training, where, by which ranks, and how a restarted job gets it back.

Two layouts, by how the model is held:

- A whole model on each rank (DDP, DataParallel, a pipeline): one file,
  ``checkpoint.pt`` (checkpoint.py), written by rank 0 alone. At a resume rank 0 maps
  it and sends it to the other ranks tensor by tensor into their model and optimizer
  (state_broadcast.py); a pipeline's stages each receive only their share.
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

from multigpu_train import checkpoint, sharding, state_broadcast
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

    # -- the whole-model checkpoint's contents ----------------------------------------

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
        """The checkpoint as rank 0 writes it (checkpoint.py); None on other ranks.

        In a pipeline across ranks every rank must call it: rank 0 gathers the stages'
        weights into the whole model's state_dict and their optimizer states into a
        list, one per stage.
        """
        t = self.trainer
        model: checkpoint.State
        optimizer: checkpoint.State | list[checkpoint.State]
        if t.step.rank_stage is None:
            if t.run.world.rank != 0:
                return None
            model, optimizer = t.model.state_dict(), t.optimizer.state_dict()
        else:
            stages = self._gather_stages()
            if stages is None:
                return None
            model = {name: value for stage in stages for name, value in stage["model"].items()}
            optimizer = [stage["optimizer"] for stage in stages]
        return {**self.progress(), "model": model, "optimizer": optimizer}

    def _gather_stages(self) -> list[checkpoint.State] | None:
        """Every stage's weights and optimizer state, on rank 0 only.

        Copied to the CPU before they are sent, over the checkpoint group (gloo): a
        tensor pickled on GPU i is unpickled by rank 0 onto its own GPU i, a device of
        another process (an extra CUDA context there, an error in EXCLUSIVE_PROCESS
        mode), and objects sent over NCCL are staged through GPU memory.
        """
        t = self.trainer
        mine = {
            "model": checkpoint.on_cpu(t.model.state_dict()),
            "optimizer": checkpoint.on_cpu(t.optimizer.state_dict()),
        }
        return t.run.barrier.gather(mine)

    def load_state_dict(self, state: checkpoint.State) -> None:
        """Continue where ``state`` stopped: weights, optimizer, gradient scale, epoch,
        position in it and shuffle seed."""
        t = self.trainer
        rank_stage = t.step.rank_stage
        weights = state["model"]
        if rank_stage is not None:
            weights = {name: weights[name] for name in t.model.state_dict()}
        t.model.load_state_dict(weights)
        optimizer = checkpoint.optimizer_share(state["optimizer"], rank_stage)
        if optimizer is not None:
            t.optimizer.load_state_dict(optimizer)
        else:
            # Written by another layout (another stage count, or a whole-model mode):
            # the weights still fit, the optimizer's moments do not.
            log.warning(
                "checkpoint optimizer state does not match %s; starting it afresh",
                f"{rank_stage.count} stages" if rank_stage else "a whole model",
            )
        self.load_progress(state)

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
            state = self._resume_sharded() if self.sharded else self._resume_whole()
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

    def _resume_whole(self) -> checkpoint.State | None:
        """Rank 0 maps the file; the others wait at the barrier while it opens it, then
        receive what they hold: the whole state, or their stage's share."""
        t = self.trainer
        barrier, rank_stage = t.run.barrier, t.step.rank_stage
        state: checkpoint.State | None = checkpoint.load_on_rank0(self.directory, t.run.world.rank)
        sharded_there = (
            state is None
            and t.run.world.rank == 0
            and self.directory is not None
            and layout.latest(self.directory) is not None
        )
        if sharded_there:
            # The others fail at the barrier, seeing rank 0 gone.
            raise RuntimeError(
                f"{self.directory} holds sharded checkpoints (--sharding); an unsharded "
                "run reads only checkpoint.pt: resume with the same --sharding, or give it "
                "another --checkpoint-dir"
            )
        barrier.wait("reading")
        if rank_stage is None:
            own = {("model", name): value for name, value in t.model.state_dict().items()}
            state = state_broadcast.broadcast(state, barrier.group, into=own)
        else:
            names = barrier.gather(list(t.model.state_dict()))
            shares = None
            if names is not None:  # rank 0
                shares = [
                    checkpoint.stage_share(state, stage_names, i, len(names))
                    if state is not None
                    else None
                    for i, stage_names in enumerate(names)
                ]
            state = barrier.scatter(shares)
        if state is not None:
            self.load_state_dict(state)
        return state

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
            saved = self._save_sharded() if self.sharded else self._save_whole()
            if saved is not None:
                t.run.metrics.checkpointed(saved)
            t.run.barrier.wait("writing")

    def _save_whole(self) -> float | None:
        state = self.state_dict()
        if state is None:
            return None
        return checkpoint.save_on_rank0(self.trainer.run.world.rank, self.directory, state)

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

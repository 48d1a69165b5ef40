"""The whole-model checkpoint's way through the ranks: rank 0 writes ``checkpoint.pt``
(checkpoint.py) and, at a resume, maps it and sends the others what they hold.

Where every rank holds the whole model (DDP) the state goes tensor by tensor into the
receivers' own parameters and optimizer state (state_broadcast.py); each stage of a
pipeline across ranks receives only its share (its weights and its own optimizer
state), tensor by tensor too. At a save the stages' states are gathered to rank 0 as
objects over the checkpoint group.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from multigpu_train import checkpoint, state_broadcast
from multigpu_train import checkpoint_layout as layout

if TYPE_CHECKING:
    from multigpu_train.checkpoint_manager import Checkpointed, CheckpointManager

log = logging.getLogger(__name__)


def state_dict(manager: CheckpointManager) -> checkpoint.State | None:
    """The checkpoint as rank 0 writes it (checkpoint.py); None on other ranks.

    In a pipeline across ranks every rank must call it: rank 0 gathers the stages'
    weights into the whole model's state_dict and their optimizer states into a
    list, one per stage.
    """
    t = manager.trainer
    model: checkpoint.State
    optimizer: checkpoint.State | list[checkpoint.State]
    if t.step.rank_stage is None:
        if t.run.world.rank != 0:
            return None
        model, optimizer = t.model.state_dict(), t.optimizer.state_dict()
    else:
        stages = _gather_stages(t)
        if stages is None:
            return None
        model = {name: value for stage in stages for name, value in stage["model"].items()}
        optimizer = [stage["optimizer"] for stage in stages]
    return {**manager.progress(), "model": model, "optimizer": optimizer}


def _gather_stages(trainer: Checkpointed) -> list[checkpoint.State] | None:
    """Every stage's weights and optimizer state, on rank 0 only.

    Copied to the CPU before they are sent, over the checkpoint group (gloo): a
    tensor pickled on GPU i is unpickled by rank 0 onto its own GPU i, a device of
    another process (an extra CUDA context there, an error in EXCLUSIVE_PROCESS
    mode), and objects sent over NCCL are staged through GPU memory.
    """
    mine = {
        "model": checkpoint.on_cpu(trainer.model.state_dict()),
        "optimizer": checkpoint.on_cpu(trainer.optimizer.state_dict()),
    }
    return trainer.run.barrier.gather(mine)


def load_state_dict(manager: CheckpointManager, state: checkpoint.State) -> None:
    """Continue where ``state`` stopped: weights, optimizer, gradient scale, epoch,
    position in it and shuffle seed."""
    t = manager.trainer
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
    manager.load_progress(state)


def resume(manager: CheckpointManager) -> checkpoint.State | None:
    """Rank 0 maps the file; the others wait at the barrier while it opens it, then
    receive what they hold: the whole state, or their stage's share."""
    t = manager.trainer
    barrier, rank_stage = t.run.barrier, t.step.rank_stage
    state: checkpoint.State | None = checkpoint.load_on_rank0(manager.directory, t.run.world.rank)
    sharded_there = (
        state is None
        and t.run.world.rank == 0
        and manager.directory is not None
        and layout.latest(manager.directory) is not None
    )
    if sharded_there:
        # The others fail at the barrier, seeing rank 0 gone.
        raise RuntimeError(
            f"{manager.directory} holds sharded checkpoints (--sharding); an unsharded "
            "run reads only checkpoint.pt: resume with the same --sharding, or give it "
            "another --checkpoint-dir"
        )
    barrier.wait("reading")
    # Weights are received straight into this rank's parameters.
    own = {("model", name): value for name, value in t.model.state_dict().items()}
    if rank_stage is None:
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
        state = state_broadcast.scatter(shares, barrier.group, into=own)
    if state is not None:
        load_state_dict(manager, state)
    return state


def save(manager: CheckpointManager) -> float | None:
    """Rank 0 writes the file (the stages of a pipeline send it theirs first); the time
    written on rank 0, else None."""
    state = state_dict(manager)
    if state is None:
        return None
    return checkpoint.save_on_rank0(manager.trainer.run.world.rank, manager.directory, state)

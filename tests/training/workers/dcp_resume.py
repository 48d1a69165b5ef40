"""Resume a sharded transformer from DIR (if it has a checkpoint), train STEPS steps,
save; rank 0 writes the whole state (weights, optimizer, progress) it resumed with and
the one it saved, for comparing across world sizes.

Usage: python -m training.workers.dcp_resume DIR OUT STEPS
Writes OUT/loaded-w<WORLD>.pt after a resume and OUT/saved-w<WORLD>.pt after a save.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

from multigpu_train import distributed, sharding
from multigpu_train.config import TrainConfig
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Run, Trainer
from multigpu_train.world import read_world
from training.workers.batch import model
from training.workers.fsdp_step import global_batches

MICRO_BATCH = 4


def whole_state(trainer: Trainer) -> dict[str, Any]:
    """Every rank must call it (the shards are gathered); complete on every rank."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights, optimizer = get_state_dict(trainer.model, trainer.optimizer, options=options)
    progress = [trainer.epoch, trainer.position, trainer.seed, trainer.count.done]
    return {"model": weights, "optimizer": optimizer, "progress": progress}


def main() -> None:
    directory, out, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    world = read_world(os.environ)
    cpu = torch.device("cpu")
    barrier = distributed.init_process_group(world, "gloo", cpu, 60, 60, checkpoints=True)
    net = model("transformer")
    sharding.shard(
        net, sharding.build_mesh("full", world.world_size, {}, "cpu"), sharding.policy("fp32")
    )
    cfg = TrainConfig(checkpoint_dir=directory, batch_size=MICRO_BATCH, seed=3)
    run = Run(cfg, world, cpu, TrainerMetrics("test", world.rank), barrier)
    trainer = Trainer(run, net, ForwardBackward(net))
    suffix = f"w{world.world_size}.pt"
    if (directory / "latest").exists():
        trainer.checkpoints.resume()
        state = whole_state(trainer)
        if world.rank == 0:
            torch.save(state, out / f"loaded-{suffix}")
    if steps:
        share = slice(world.rank * MICRO_BATCH, (world.rank + 1) * MICRO_BATCH)
        for x, y in global_batches(steps, world.world_size * MICRO_BATCH):
            trainer.run_batch(x[share], y[share])
        trainer.epoch, trainer.position = trainer.epoch + 1, 8 * world.world_size
        trainer.checkpoints.save()
        state = whole_state(trainer)
        if world.rank == 0:
            torch.save(state, out / f"saved-{suffix}")
    distributed.destroy_process_group()
    # As the trainer does: a finished gloo rank may abort in interpreter finalization.
    distributed.exit_after_success()


if __name__ == "__main__":
    main()

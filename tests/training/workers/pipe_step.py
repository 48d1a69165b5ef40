"""One torch.distributed.pipelining step on a fixed batch; writes this stage's gradients.

Usage: python -m training.workers.pipe_step OUT SCHEDULE MICRO_BATCHES BATCH MODEL
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from multigpu_train import dist_pipeline, distributed
from multigpu_train.world import read_world
from training.workers.batch import digits_batch, model


def main() -> None:
    out, schedule, micro, size, kind = (
        Path(sys.argv[1]),
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
        sys.argv[5],
    )
    torch.set_num_threads(1)
    world = read_world(os.environ)
    cpu = torch.device("cpu")
    distributed.init_process_group(world, "gloo", cpu, 60)
    stage = dist_pipeline.make_stage(
        model(kind), world.rank, world.world_size, cpu, micro, schedule
    )
    x, y = digits_batch(size)
    loss = dist_pipeline.step(stage, x, y)
    grads = {n: p.grad.clone() for n, p in stage.module.named_parameters() if p.grad is not None}
    torch.save({"loss": loss, "grads": grads}, out / f"rank{world.rank}.pt")
    distributed.destroy_process_group()


if __name__ == "__main__":
    main()

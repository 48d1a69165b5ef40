"""One torch.distributed.pipelining step on a fixed batch per case; writes this
stage's loss and gradients. One process runs every case, in one process group.
Usage: python -m training.workers.pipe_step OUT BATCH NAME:SCHEDULE:MICRO_BATCHES:MODEL...
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from multigpu_train import dist_pipeline, distributed
from multigpu_train.world import World, read_world
from training.workers.batch import digits_batch, model


def one_case(world: World, out: Path, size: int, case: str) -> None:
    name, schedule, micro, kind = case.split(":")
    cpu = torch.device("cpu")
    stage = dist_pipeline.own_stage(model(kind), world.rank, world.world_size, cpu)
    step = dist_pipeline.ScheduleStep(
        stage, world.rank, world.world_size, cpu, int(micro), schedule
    )
    x, y = digits_batch(size)
    loss = step.forward_backward(x, y)
    grads = {n: p.grad.clone() for n, p in stage.named_parameters() if p.grad is not None}
    value = None if loss is None else float(loss)
    torch.save({"loss": value, "grads": grads}, out / f"{name}-rank{world.rank}.pt")


def main() -> None:
    out, size, cases = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    torch.set_num_threads(1)
    world = read_world(os.environ)
    distributed.init_process_group(world, "gloo", torch.device("cpu"), 60)
    for case in cases:
        one_case(world, out, size, case)
    distributed.destroy_process_group()


if __name__ == "__main__":
    main()

"""fp16 in a pipeline across ranks: does a gradient overflow on one stage skip the
optimizer step on every stage?

For each case, two steps on a fixed batch: a clean one, then one where rank 0 makes one
of its gradients infinite after the backward (what an fp16 overflow leaves). Each rank
writes, per step, whether its weights changed and its scale before and after.
Cases: ``shared``, the trainer's set-up (the stages' scalers combine their overflow
checks), and ``per-rank``, a plain scaler per stage.
Usage: python -m training.workers.pipe_fp16 OUT
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from multigpu_train import dist_pipeline, distributed
from multigpu_train.precision import Precision
from multigpu_train.world import World, read_world
from training.workers.batch import digits_batch, model


def one_case(world: World, shared: bool) -> list[dict[str, Any]]:
    cpu = torch.device("cpu")
    stage = dist_pipeline.own_stage(model(), world.rank, world.world_size, cpu)
    precision = Precision("fp16", "cpu", shared_by=dist.group.WORLD if shared else None)
    step = dist_pipeline.ScheduleStep(
        stage, world.rank, world.world_size, cpu, 4, "GPipe", precision
    )
    optimizer = torch.optim.Adam(stage.parameters())
    x, y = digits_batch(32)
    steps = []
    for overflow in (False, True):
        before = [p.detach().clone() for p in stage.parameters()]
        scale_before = precision.scaler.get_scale()
        step.forward_backward(x, y)
        if overflow and world.rank == 0:
            grad = next(stage.parameters()).grad
            assert grad is not None
            grad.view(-1)[0] = float("inf")
        precision.step(optimizer)
        optimizer.zero_grad()
        stepped = any(
            not torch.equal(a, p) for a, p in zip(before, stage.parameters(), strict=True)
        )
        steps.append(
            {
                "stepped": stepped,
                "scale_before": scale_before,
                "scale_after": precision.scaler.get_scale(),
            }
        )
    return steps


def main() -> None:
    out = Path(sys.argv[1])
    torch.set_num_threads(1)
    world = read_world(os.environ)
    distributed.init_process_group(world, "gloo", torch.device("cpu"), 60)
    results = {case: one_case(world, case == "shared") for case in ("shared", "per-rank")}
    torch.save(results, out / f"rank{world.rank}.pt")
    distributed.destroy_process_group()


if __name__ == "__main__":
    main()

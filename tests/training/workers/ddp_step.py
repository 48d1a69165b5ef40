"""One DDP optimizer step on a fixed batch per case; writes this rank's gradients.

The optimizer is SGD with lr=1, so the weight change is exactly minus the gradient
that DDP all-reduced (gradients themselves are cleared by the step). One process
runs every case, in one process group: starting processes is the slow part.
Usage: python -m training.workers.ddp_step OUT MICRO_BATCH NAME:ACCUM:BUCKET_MB:AS_VIEW...
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from multigpu_train import ddp, distributed
from multigpu_train.config import TrainConfig
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Run, Trainer
from multigpu_train.world import World, read_world
from training.workers.batch import digits_batch, model


def one_case(world: World, out: Path, micro: int, case: str) -> None:
    name, accum_text, bucket_mb, as_view = case.split(":")
    accum = int(accum_text)
    cfg = TrainConfig(
        bucket_cap_mb=float(bucket_mb),
        gradient_as_bucket_view=as_view == "1",
        grad_accum_steps=accum,
    )
    cpu = torch.device("cpu")
    net = model()
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    wrapped = ddp.wrap(net, cpu, cfg)
    # This rank's share of the global batch, as ``accum`` micro-batches.
    x, y = digits_batch(world.world_size * accum * micro)
    share = slice(world.rank * accum * micro, (world.rank + 1) * accum * micro)
    batches = list(zip(x[share].chunk(accum), y[share].chunk(accum), strict=True))
    run = Run(cfg, world, cpu, TrainerMetrics("test", world.rank))
    optimizer = torch.optim.SGD(net.parameters(), lr=1.0)
    Trainer(run, net, ForwardBackward(wrapped), optimizer).run_epoch(batches)
    grads = {n: before[n] - p.detach() for n, p in net.named_parameters()}
    torch.save(grads, out / f"{name}-rank{world.rank}.pt")


def main() -> None:
    out, micro, cases = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    torch.set_num_threads(1)
    world = read_world(os.environ)
    distributed.init_process_group(world, "gloo", torch.device("cpu"), 60)
    for case in cases:
        one_case(world, out, micro, case)
    distributed.destroy_process_group()


if __name__ == "__main__":
    main()

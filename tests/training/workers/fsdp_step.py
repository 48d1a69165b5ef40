"""A few optimizer steps of the sharded transformer per case, on fixed batches; writes
rank 0's whole weights after them and each rank's losses.

One process runs every case, in one process group: starting processes is the slow
part. A case is NAME:SHARDING:ACCUM:AC (AC 1: activation checkpointing per block).
Rank r trains on share r of each global batch, split into ACCUM micro-batches.
Usage: python -m training.workers.fsdp_step OUT STEPS MICRO_BATCH CASE...
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from multigpu_train import blocks, distributed, sharding
from multigpu_train.config import TrainConfig
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Run, Trainer
from multigpu_train.world import World, read_world
from training.workers.batch import model

LR = 0.05
MOMENTUM = 0.9


def optimizer(net: torch.nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum: a sharded state too, and linear in the gradients, so the
    rounding of a reduction in another order stays rounding (Adam divides by a
    gradient's magnitude: the attention's key bias, whose gradient is zero up to
    rounding, moves by noise times lr)."""
    return torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)


def global_batches(steps: int, size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The same ``steps`` batches of ``size`` samples in every process."""
    gen = torch.Generator().manual_seed(1)
    return [
        (torch.randn(size, 1, 8, 8, generator=gen), torch.randint(0, 10, (size,), generator=gen))
        for _ in range(steps)
    ]


def one_case(world: World, out: Path, steps: int, micro: int, case: str) -> None:
    name, kind, accum_text, ac = case.split(":")
    accum = int(accum_text)
    cpu = torch.device("cpu")
    net = model("transformer")
    blocks.apply(net, activation_checkpointing=ac == "1")
    mesh = sharding.build_mesh(kind, world.world_size, os.environ, "cpu")
    sharding.shard(net, mesh, sharding.policy("fp32"))
    cfg = TrainConfig(grad_accum_steps=accum, batch_size=micro)
    run = Run(cfg, world, cpu, TrainerMetrics("test", world.rank))
    trainer = Trainer(run, net, ForwardBackward(net), optimizer(net))
    share = accum * micro
    losses = []
    for x, y in global_batches(steps, world.world_size * share):
        mine = slice(world.rank * share, (world.rank + 1) * share)
        parts = list(zip(x[mine].chunk(accum), y[mine].chunk(accum), strict=True))
        step_loss = 0.0
        for i, (xi, yi) in enumerate(parts):
            loss = trainer.run_batch(xi, yi, optimizer_step=i == accum - 1)
            assert loss is not None
            step_loss += float(loss) / accum
        losses.append(step_loss)
    torch.save(torch.tensor(losses), out / f"{name}-losses-rank{world.rank}.pt")
    whole = get_model_state_dict(net, options=StateDictOptions(full_state_dict=True))
    if world.rank == 0:
        torch.save(whole, out / f"{name}-weights.pt")


def main() -> None:
    out, steps, micro, cases = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    torch.set_num_threads(1)
    world = read_world(os.environ)
    distributed.init_process_group(world, "gloo", torch.device("cpu"), 60)
    for case in cases:
        one_case(world, out, steps, micro, case)
    distributed.destroy_process_group()
    # As the trainer does: a finished gloo rank may abort in interpreter finalization.
    distributed.exit_after_success()


if __name__ == "__main__":
    main()

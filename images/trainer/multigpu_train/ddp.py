"""DistributedDataParallel: one process per GPU (or one on the CPU), any number of pods.

Run as ``python -m multigpu_train.ddp`` (the operator's RANK/WORLD_SIZE/MASTER_*) or
``torchrun -m multigpu_train.ddp`` (fixed or elastic). After a restart or a change of
membership it resumes from the latest checkpoint. ``--sharding full|hybrid`` shards the
model instead of replicating it (FSDP2, sharding.py); ``--activation-checkpointing``
and ``--compile`` apply to each block (blocks.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import torch
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel

from multigpu_train import blocks, distributed, models, progress, sharding
from multigpu_train.config import TrainConfig
from multigpu_train.errors import exit_on_setup_error
from multigpu_train.precision import Precision
from multigpu_train.startup import Started, start
from multigpu_train.steps import ForwardBackward, Step
from multigpu_train.trainer import Run, Trainer


def wrap(model: torch.nn.Module, device: torch.device, cfg: TrainConfig) -> DistributedDataParallel:
    """DDP with the knobs from the flags; the model must already be on ``device``."""
    return DistributedDataParallel(
        model,
        device_ids=[device] if device.type == "cuda" else None,
        bucket_cap_mb=cfg.bucket_cap_mb,
        gradient_as_bucket_view=cfg.gradient_as_bucket_view,
        find_unused_parameters=cfg.find_unused_parameters,
    )


def replicated_step(model: torch.nn.Module, device: torch.device, cfg: TrainConfig) -> Step:
    """DDP over ``model``, autocast in ``--precision``."""
    precision = Precision(cfg.precision, device.type)
    # Scored through the inner module: a DDP forward could start collectives.
    forward = precision.wrap(model)
    return ForwardBackward(wrap(forward, device, cfg), evaluate=forward, precision=precision)


def sharded_step(model: torch.nn.Module, s: Started) -> Step:
    """``model`` sharded in place on the mesh of ``--sharding``; its precision is the
    sharding's mixed-precision policy, not autocast."""
    mesh = sharding.build_mesh(s.cfg.sharding, s.world.world_size, os.environ, s.device.type)
    sharding.shard(model, mesh, sharding.policy(s.cfg.precision))
    return ForwardBackward(model, precision=Precision("fp32", s.device.type))


def train(argv: Sequence[str] | None = None) -> float:
    s = start(argv, ("ddp",), "multigpu_train.ddp")
    cfg, world = s.cfg, s.world
    sharding.check(cfg.sharding, cfg.precision, world.world_size, os.environ)
    barrier = s.join()
    try:
        model = models.build(cfg, s.data.sample_shape, s.data.classes).to(s.device)
        blocks.apply(
            model, activation_checkpointing=cfg.activation_checkpointing, compile=cfg.compile
        )
        if cfg.sharding == "none":
            step = replicated_step(model, s.device, cfg)
        else:
            step = sharded_step(model, s)
        run = Run(cfg, world, s.device, s.metrics, barrier)
        return Trainer(run, model, step).train(s.data)
    finally:
        distributed.destroy_process_group()


@record
def main() -> None:
    with exit_on_setup_error():
        train(sys.argv[1:])
    progress.finished()  # the last progress, for a job that ends before the operator reads it
    distributed.exit_after_success()


if __name__ == "__main__":
    main()

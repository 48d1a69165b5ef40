"""Model parallelism: the model cut into pipeline stages, batches cut into micro-batches.

One process (WORLD_SIZE 1): the stages sit on the visible GPUs (stage s on GPU
s mod G) or all on the CPU, micro-batches interleaved (local_pipeline.py). Several
ranks: stage = RANK with torch.distributed.pipelining (dist_pipeline.py), schedule
MGJ_PIPELINE_SCHEDULE. Both train in the one loop of trainer.py; only the step differs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from multigpu_train import devices, dist_pipeline, distributed, models, progress
from multigpu_train.errors import exit_on_setup_error
from multigpu_train.local_pipeline import LocalPipeline, stage_devices
from multigpu_train.precision import Precision
from multigpu_train.startup import Started, start
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Run, Trainer

log = logging.getLogger("multigpu_train.pipeline")

# Stages of a one-process pipeline on the CPU when MGJ_PIPELINE_STAGES is unset: two,
# so that the split itself is exercised.
CPU_STAGES = 2


def train_local(s: Started) -> float:
    """Every stage in this process, on the visible GPUs or the CPU."""
    cfg = s.cfg
    visible = devices.select_devices(cfg.device, os.environ)
    stages = cfg.stages or (len(visible) if visible[0].type == "cuda" else CPU_STAGES)
    model = models.build(cfg, s.data.sample_shape, s.data.classes)
    placed = stage_devices(stages, visible)
    precision = Precision(cfg.precision, visible[0].type)
    local_pipeline = LocalPipeline(model, placed, cfg.micro_batches)
    step = ForwardBackward(precision.wrap(local_pipeline), precision=precision)
    log.info(
        "%d stages on %s, %d micro-batches", stages, [str(d) for d in placed], cfg.micro_batches
    )
    # Outputs, and so the loss, live on the last stage's device; inputs go straight
    # to the first stage's, not through the last's.
    run = Run(cfg, s.world, placed[-1], s.metrics, input_device=placed[0])
    return Trainer(run, model, step).train(s.data)


def train_distributed(s: Started) -> float:
    """One stage per rank; this rank trains only its own."""
    cfg, world = s.cfg, s.world
    dist_pipeline.check(cfg, world.world_size)
    # Cut before joining: a model with too few layers for the ranks fails on every rank.
    model = models.build(cfg, s.data.sample_shape, s.data.classes)
    stage = dist_pipeline.own_stage(model, world.rank, world.world_size, s.device)
    barrier = s.join()
    try:
        # The stages' fp16 scalers decide together whether a step overflowed.
        precision = Precision(cfg.precision, s.device.type, shared_by=dist.group.WORLD)
        step = dist_pipeline.ScheduleStep(
            stage,
            world.rank,
            world.world_size,
            s.device,
            cfg.micro_batches,
            cfg.schedule,
            precision,
        )
        run = Run(cfg, world, s.device, s.metrics, barrier)
        return Trainer(run, stage, step).train(s.data)
    finally:
        distributed.destroy_process_group()


def train(argv: Sequence[str] | None = None) -> float:
    s = start(argv, ("pipeline",), "multigpu_train.pipeline")
    if s.world.world_size > 1:
        return train_distributed(s)
    return train_local(s)


@record
def main() -> None:
    with exit_on_setup_error():
        train(sys.argv[1:])
    progress.finished()  # the last progress, for a job that ends before the operator reads it
    distributed.exit_after_success()


if __name__ == "__main__":
    main()

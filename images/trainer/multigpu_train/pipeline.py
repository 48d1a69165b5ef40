"""Model parallelism: the model cut into pipeline stages, batches cut into micro-batches.

One process (WORLD_SIZE 1): the stages sit on the visible GPUs (stage s on GPU
s mod G) or all on the CPU, micro-batches interleaved (local_pipeline.py). Several
ranks: stage = RANK with torch.distributed.pipelining (dist_pipeline.py), schedule
MGJ_PIPELINE_SCHEDULE.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence

import torch
from torch.distributed.elastic.multiprocessing.errors import record
from torch.utils.data import DataLoader

from multigpu_train import checkpoint, devices, dist_pipeline, distributed, fit, models
from multigpu_train.local_pipeline import LocalPipeline, stage_devices
from multigpu_train.split import split
from multigpu_train.startup import Started, start

log = logging.getLogger("multigpu_train.pipeline")

# Stages of a one-process pipeline on the CPU when MGJ_PIPELINE_STAGES is unset: two,
# so that the split itself is exercised.
CPU_STAGES = 2


def train_local(s: Started) -> float:
    cfg = s.cfg
    visible = devices.select_devices(cfg.device, os.environ)
    stages = cfg.stages or (len(visible) if visible[0].type == "cuda" else CPU_STAGES)
    model = models.build(cfg, s.data.sample_shape, s.data.classes)
    placed = stage_devices(stages, visible)
    pipeline = LocalPipeline(split(model, stages), placed, cfg.micro_batches)
    log.info(
        "%d stages on %s, %d micro-batches", stages, [str(d) for d in placed], cfg.micro_batches
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    # Outputs, and so the loss, live on the last stage's device.
    run = fit.Run(cfg, s.world, placed[-1], s.metrics)
    return fit.fit(
        run,
        pipeline,
        model,
        optimizer,
        fit.loader(run, s.data.train, None),
        None,
        fit.loader(run, s.data.test, None),
    )


def _batches(s: Started, dataset: object, seed: int) -> DataLoader[tuple[torch.Tensor, ...]]:
    # Every rank must see the same batches in the same order: one seeded generator.
    return DataLoader(
        dataset,  # type: ignore[arg-type]
        batch_size=s.cfg.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
        drop_last=True,  # the pipeline's micro-batch shapes are fixed at the first step
    )


def train_distributed(s: Started) -> float:
    cfg, world = s.cfg, s.world
    dist_pipeline.check(cfg, world.world_size)
    distributed.init_process_group(world, s.backend, s.device, cfg.init_timeout)
    try:
        model = models.build(cfg, s.data.sample_shape, s.data.classes)
        stage = dist_pipeline.make_stage(
            model, world.rank, world.world_size, s.device, cfg.micro_batches, cfg.schedule
        )
        optimizer = torch.optim.Adam(stage.module.parameters(), lr=cfg.lr)
        start_epoch, seed = 0, cfg.seed
        state = checkpoint.load_broadcast(cfg.checkpoint_dir, world.rank, s.device)
        if state is not None:
            dist_pipeline.restore(stage, optimizer, state)
            start_epoch, seed = int(state["epoch"]), int(state["sampler"]["seed"])
            log.info("resumed from epoch %d", start_epoch)
        for epoch in range(start_epoch, cfg.epochs):
            s.metrics.epoch.set(epoch)
            losses: list[float] = []
            t0 = time.perf_counter()
            for index, (x, y) in enumerate(_batches(s, s.data.train, seed + epoch)):
                if cfg.steps_per_epoch and index >= cfg.steps_per_epoch:
                    break
                t1 = time.perf_counter()
                loss = dist_pipeline.step(stage, x.to(s.device), y.to(s.device))
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                t2 = time.perf_counter()
                s.metrics.observe_step(len(y), t1 - t0, t2 - t1, loss)
                if loss is not None:
                    losses.append(loss)
                t0 = time.perf_counter()
            if stage.is_last:
                log.info(
                    "epoch %d/%d done: loss=%.4f",
                    epoch + 1,
                    cfg.epochs,
                    sum(losses) / max(len(losses), 1),
                )
            saved = (
                dist_pipeline.save(stage, optimizer, cfg.checkpoint_dir, epoch + 1, seed)
                if cfg.checkpoint_dir is not None
                else None
            )
            if saved is not None:
                s.metrics.checkpointed(saved)
        correct = total = 0
        for x, y in _batches(s, s.data.test, seed):
            logits = dist_pipeline.predict(stage, x.to(s.device), y.to(s.device))
            if logits is not None:
                correct += int((logits.argmax(dim=1).cpu() == y).sum())
                total += len(y)
        accuracy = correct / total if total else float("nan")
        if stage.is_last:
            s.metrics.test_accuracy.set(accuracy)
            log.info("final test_accuracy=%.4f world_size=%d", accuracy, world.world_size)
        return accuracy
    finally:
        distributed.destroy_process_group()


def train(argv: Sequence[str] | None = None) -> float:
    s = start(argv, ("pipeline",), "multigpu_train.pipeline")
    if s.world.world_size > 1:
        return train_distributed(s)
    return train_local(s)


@record
def main() -> None:
    train(sys.argv[1:])
    distributed.exit_after_success()


if __name__ == "__main__":
    main()

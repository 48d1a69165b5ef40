"""What the DataParallel and DDP entrypoints share: resume, the epoch loop, checkpoints."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from multigpu_train import checkpoint, loop
from multigpu_train.config import TrainConfig
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.world import World

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Run:
    cfg: TrainConfig
    world: World
    device: torch.device
    metrics: TrainerMetrics


def resume(run: Run, model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[int, int]:
    """(first epoch to run, sampler seed), from the latest checkpoint when there is one."""
    state = checkpoint.load_broadcast(run.cfg.checkpoint_dir, run.world.rank, run.device)
    if state is None:
        return 0, run.cfg.seed
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    epoch = int(state["epoch"])
    run.metrics.checkpointed(float(state["saved_at"]))
    log.info(
        "resumed from epoch %d (checkpoint of world size %d, now %d)",
        epoch,
        state["world_size"],
        run.world.world_size,
    )
    return epoch, int(state["sampler"]["seed"])


def loader(
    run: Run, dataset: Dataset[tuple[torch.Tensor, ...]], sampler: DistributedSampler[int] | None
) -> DataLoader[tuple[torch.Tensor, ...]]:
    return DataLoader(
        dataset,
        batch_size=run.cfg.batch_size,
        sampler=sampler,
        shuffle=sampler is None,
        num_workers=run.cfg.data_workers,
        pin_memory=run.device.type == "cuda",
        # Workers start once, not every epoch.
        persistent_workers=run.cfg.data_workers > 0,
    )


def fit(
    run: Run,
    model: nn.Module,
    state_model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train: DataLoader[tuple[torch.Tensor, ...]],
    sampler: DistributedSampler[int] | None,
    test: Iterable[loop.Batch],
    *,
    no_sync: Callable[[], AbstractContextManager[None]] | None = None,
    eval_model: nn.Module | None = None,
) -> float:
    """Train from the checkpoint's epoch to ``cfg.epochs``; the test accuracy.

    ``state_model`` is the unwrapped module whose state_dict is checkpointed, so a
    checkpoint loads into any mode. ``eval_model`` scores the test split (default
    ``model``); DDP passes its inner module so evaluation starts no collectives.
    """
    cfg, world = run.cfg, run.world
    start_epoch, seed = resume(run, state_model, optimizer)
    if sampler is not None:
        sampler.seed = seed
    for epoch in range(start_epoch, cfg.epochs):
        run.metrics.epoch.set(epoch)
        if sampler is not None:
            # Without it every epoch would shuffle the same way.
            sampler.set_epoch(epoch)
        else:
            torch.manual_seed(seed + epoch)
        result = loop.train_epoch(
            model,
            train,
            optimizer,
            run.device,
            run.metrics,
            accum_steps=cfg.grad_accum_steps,
            no_sync=no_sync,
            max_batches=cfg.steps_per_epoch,
        )
        log.info(
            "epoch %d/%d done: loss=%.4f samples/s=%.1f world_size=%d",
            epoch + 1,
            cfg.epochs,
            result.mean_loss,
            result.samples_per_second,
            world.world_size,
        )
        if world.rank == 0 and cfg.checkpoint_dir is not None:
            state = checkpoint.make_state(
                epoch=epoch + 1,
                model=state_model.state_dict(),
                optimizer=optimizer.state_dict(),
                seed=seed,
                world_size=world.world_size,
            )
            run.metrics.checkpointed(checkpoint.save_on_rank0(0, cfg.checkpoint_dir, state))
    scorer = eval_model if eval_model is not None else model
    correct, total = loop.count_correct(scorer, test, run.device)
    accuracy = loop.global_accuracy(correct, total, run.device)
    run.metrics.test_accuracy.set(accuracy)
    log.info("final test_accuracy=%.4f world_size=%d", accuracy, world.world_size)
    return accuracy

"""The training and evaluation loops that every entrypoint shares."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sized
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from multigpu_train.metrics import TrainerMetrics

Batch = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class EpochResult:
    mean_loss: float
    samples: int
    seconds: float

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_epoch(
    model: nn.Module,
    batches: Iterable[Batch],
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    metrics: TrainerMetrics,
    *,
    accum_steps: int = 1,
    no_sync: Callable[[], AbstractContextManager[None]] | None = None,
    max_batches: int = 0,
) -> EpochResult:
    """One pass over ``batches``; an optimizer step every ``accum_steps`` batches.

    With gradient accumulation under DDP, ``no_sync`` skips the all-reduce for all
    but the last batch of each group; the forward must run inside it too, or DDP
    still synchronises.
    """
    model.train()
    total = len(batches) if isinstance(batches, Sized) else 0
    if max_batches:
        total = min(total, max_batches) if total else max_batches
    loss_fn = nn.CrossEntropyLoss()
    losses: list[float] = []
    samples = 0
    started = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    it = iter(batches)
    index = 0
    while not max_batches or index < max_batches:
        t0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            break
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        t1 = time.perf_counter()
        sync_now = (index + 1) % accum_steps == 0 or index + 1 == total
        context = no_sync() if no_sync is not None and not sync_now else contextlib.nullcontext()
        with context:
            loss = loss_fn(model(x), y) / accum_steps
            loss.backward()
        if sync_now:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        value = float(loss.item()) * accum_steps  # item() waits for the GPU
        t2 = time.perf_counter()
        metrics.observe_step(len(y), t1 - t0, t2 - t1, value)
        losses.append(value)
        samples += len(y)
        index += 1
    _sync(device)
    mean = sum(losses) / len(losses) if losses else float("nan")
    return EpochResult(mean, samples, time.perf_counter() - started)


@torch.no_grad()
def count_correct(
    model: nn.Module, batches: Iterable[Batch], device: torch.device
) -> tuple[int, int]:
    """(correct, total) on this process's share of the test data."""
    model.eval()
    correct = total = 0
    for x, y in batches:
        predicted = model(x.to(device)).argmax(dim=1).cpu()
        correct += int((predicted == y).sum())
        total += len(y)
    return correct, total


def global_accuracy(correct: int, total: int, device: torch.device) -> float:
    """Accuracy over every rank's share (an all-reduce when distributed)."""
    counts = torch.tensor([correct, total], dtype=torch.float64, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(counts)
    return float(counts[0] / counts[1]) if counts[1] > 0 else float("nan")

"""The Trainer's step count (multigpu_train.step_count): optimizer steps per epoch, done
at a checkpoint's position, and left to the end, against the loop's own rules."""

from __future__ import annotations

import pytest
import torch
from prometheus_client import CollectorRegistry
from torch.utils.data import DataLoader, TensorDataset

from multigpu_train import progress
from multigpu_train.sampling import ResumableSampler
from multigpu_train.step_count import (
    EpochShape,
    StepCount,
    epoch_batches,
    optimizer_steps,
    reader_batches,
)


def loop_steps(done: int, batches: int, accum: int) -> int:
    """Trainer.run_epoch's rule, batch by batch: a step after every accum-th and the last."""
    return sum(
        1 for n in range(done + 1, done + batches + 1) if n % accum == 0 or n == done + batches
    )


@pytest.mark.parametrize("accum", [1, 2, 3, 4])
@pytest.mark.parametrize("done", [0, 4, 12])
@pytest.mark.parametrize("batches", [0, 1, 5, 12, 13])
def test_optimizer_steps_follow_the_loop(accum: int, done: int, batches: int) -> None:
    assert optimizer_steps(done, batches, accum) == loop_steps(done, batches, accum)


@pytest.mark.parametrize(
    ("position", "per_batch", "cap", "available", "expected"),
    [
        (0, 16, 0, 24, (0, 0, 24)),
        (0, 16, 0, None, (0, 0, 0)),  # neither known: the loop runs to the data's end
        (0, 16, 10, 24, (0, 10, 10)),
        (0, 16, 10, None, (0, 10, 10)),
        (192, 16, 0, 12, (12, 0, 12)),
        (192, 16, 20, 12, (12, 8, 8)),  # batches before the checkpoint count against the cap
        (192, 16, 10, 12, (12, 0, 0)),
        (200, 16, 0, 12, (13, 0, 12)),  # a partial batch is a batch
    ],
)
def test_epoch_batches(
    position: int,
    per_batch: int,
    cap: int,
    available: int | None,
    expected: tuple[int, int, int],
) -> None:
    assert epoch_batches(position, per_batch, cap, available) == expected


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize(("readers", "position"), [(1, 0), (2, 0), (3, 0), (2, 96), (3, 99)])
def test_reader_batches_is_the_loaders_length(readers: int, position: int, drop_last: bool) -> None:
    samples, batch = 301, 8
    sampler = ResumableSampler(range(samples), readers, 0, seed=0)
    sampler.set_position(0, position)
    dataset = TensorDataset(torch.arange(samples))
    loader = DataLoader(dataset, batch_size=batch, sampler=sampler, drop_last=drop_last)
    assert reader_batches(samples, position, readers, batch, drop_last) == len(loader)


# 384 samples, 2 readers of 8: 24 batches an epoch.
SHAPE = EpochShape(
    samples=384, readers=2, batch_size=8, drop_last=False, grad_accum=1, cap=0
)  # fmt: skip


@pytest.mark.parametrize(
    ("shape", "epoch", "position", "epochs", "at", "left"),
    [
        (SHAPE, 0, 0, 3, 0, 72),
        (SHAPE, 0, 192, 3, 12, 60),
        (SHAPE, 2, 0, 3, 48, 24),
        (SHAPE, 3, 0, 3, 72, 0),
        # Accumulating 5 batches: 24 batches make 5 steps (the last after 4 batches).
        (EpochShape(384, 2, 8, False, 5, 0), 1, 160, 2, 7, 3),
        # --steps-per-epoch 10 batches: 10 steps an epoch, whatever the data.
        (EpochShape(384, 2, 8, False, 1, 10), 1, 64, 2, 14, 6),
        # Resumed with 3 readers where 2 trained: the rest splits into 8 batches of 24.
        (EpochShape(384, 3, 8, False, 1, 0), 0, 192, 2, 8, 8 + 16),
    ],
)
def test_steps_done_and_left(
    shape: EpochShape, epoch: int, position: int, epochs: int, at: int, left: int
) -> None:
    assert shape.steps_at(epoch, position) == at
    assert shape.steps_left(epoch, position, epochs) == left


def gauges() -> tuple[StepCount, CollectorRegistry]:
    registry = CollectorRegistry()
    return StepCount(progress.Reporter(registry, "j", 0)), registry


def read(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name, {"job": "j", "rank": "0"})


@pytest.mark.parametrize(
    ("saved_step", "done", "resumed"),
    [
        (None, 12, 12),  # an older image's checkpoint: its epoch and position
        (30, 30, 30),  # the checkpoint's own count wins
    ],
)
def test_a_resume_continues_from_the_checkpoints_step(
    saved_step: int | None, done: int, resumed: int
) -> None:
    count, registry = gauges()
    count.loaded(saved_step)
    count.start(SHAPE, 0, 192, epochs=3)
    assert count.done == done
    assert read(registry, progress.RESUMED_STEP) == resumed
    assert read(registry, progress.STEP) == done
    assert read(registry, progress.TOTAL_STEPS) == done + 60
    count.stepped()
    assert read(registry, progress.STEP) == done + 1


def test_a_fresh_start_reports_no_resume() -> None:
    count, registry = gauges()
    count.start(SHAPE, 0, 0, epochs=2)
    assert (read(registry, progress.RESUMED_STEP), read(registry, progress.STEP)) == (0, 0)
    assert (read(registry, progress.TOTAL_STEPS), read(registry, progress.EPOCH)) == (48, 0)
    for _ in range(24):
        count.stepped()
    count.epoch_started(1, 0, 2)
    assert (read(registry, progress.STEP), read(registry, progress.RESUMED_STEP)) == (24, 0)
    assert (read(registry, progress.TOTAL_STEPS), read(registry, progress.EPOCH)) == (48, 1)


def test_a_run_resumed_after_its_last_epoch_has_nothing_left() -> None:
    count, registry = gauges()
    count.loaded(48)
    count.start(SHAPE, 2, 0, epochs=2)
    assert (read(registry, progress.STEP), read(registry, progress.TOTAL_STEPS)) == (48, 48)
    assert read(registry, progress.EPOCH) == 0  # never set: no epoch is trained

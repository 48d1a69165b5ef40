"""The Trainer's optimizer steps: how many the job has done, and how many it will run.

The count goes into every checkpoint (its ``step``), so a resumed run continues from the
checkpoint's step rather than 0; a checkpoint of an older image, without one, gets the
steps its epoch and position stand for with this run's settings. The total is the
steps done plus those left to ``--epochs`` with the batches of this world, so it stays
right when an elastic job resumes at another world size. Both are served as progress
gauges (progress.py) for the operator.
"""

from __future__ import annotations

from dataclasses import dataclass

from multigpu_train.config import TrainConfig
from multigpu_train.progress import Reporter


def epoch_batches(
    position: int, per_batch: int, cap: int, available: int | None
) -> tuple[int, int, int]:
    """``(done, limit, to_run)`` of an epoch standing at ``position`` (samples trained by
    all readers, ``per_batch`` a step): the batches done before (they count against
    ``--steps-per-epoch``, ``cap``), the most batches left under the cap (0: no cap), and
    those the loader's ``available`` batches give (0 where neither is known)."""
    done = -(-position // per_batch)
    limit = max(cap - done, 0) if cap else 0
    to_run = available or 0
    if cap:
        to_run = min(to_run, limit) if to_run else limit
    return done, limit, to_run


def optimizer_steps(done: int, batches: int, accum: int) -> int:
    """Optimizer steps in batches ``done + 1 .. done + batches`` of an epoch: one after
    every ``accum``-th batch, and one after the last."""
    if batches <= 0:
        return 0
    end = done + batches
    return end // accum - done // accum + (1 if end % accum else 0)


def reader_batches(samples: int, position: int, readers: int, batch: int, drop_last: bool) -> int:
    """A reader's batches from ``position`` of an epoch of ``samples`` on: its DataLoader's
    length (ResumableSampler pads the readers' shares to one length)."""
    share = -(-max(samples - position, 0) // readers)
    return share // batch if drop_last else -(-share // batch)


@dataclass(frozen=True)
class EpochShape:
    """What decides a run's steps per epoch: its data, readers and settings."""

    samples: int  # training samples
    readers: int  # ranks reading different samples
    batch_size: int
    drop_last: bool
    grad_accum: int
    cap: int  # --steps-per-epoch (batches); 0: none

    @classmethod
    def of(cls, cfg: TrainConfig, samples: int, readers: int, drop_last: bool) -> EpochShape:
        return cls(
            samples, readers, cfg.batch_size, drop_last, cfg.grad_accum_steps, cfg.steps_per_epoch
        )

    def steps_from(self, position: int) -> tuple[int, int]:
        """Optimizer steps of an epoch before ``position``, and from it to the end."""
        available = reader_batches(
            self.samples, position, self.readers, self.batch_size, self.drop_last
        )
        done, _, to_run = epoch_batches(
            position, self.batch_size * self.readers, self.cap, available
        )
        return optimizer_steps(0, done, self.grad_accum), optimizer_steps(
            done, to_run, self.grad_accum
        )

    def steps_at(self, epoch: int, position: int) -> int:
        """Steps done by a run standing at ``epoch`` and ``position`` in it."""
        return epoch * sum(self.steps_from(0)) + self.steps_from(position)[0]

    def steps_left(self, epoch: int, position: int, epochs: int) -> int:
        """Steps from ``epoch`` and ``position`` to the end of ``epochs``."""
        if epoch >= epochs:
            return 0
        return self.steps_from(position)[1] + (epochs - epoch - 1) * sum(self.steps_from(0))


class StepCount:
    """The job's optimizer steps as this process counts them, served through ``reporter``."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.done = 0
        self.shape: EpochShape | None = None
        self._loaded = False  # a checkpoint was loaded
        self._estimate = False  # ... without a step: count it from its epoch and position

    def loaded(self, step: int | None) -> None:
        """A checkpoint was loaded; ``step`` is its count (None in an older image's)."""
        self._loaded, self._estimate = True, step is None
        self.done = step or 0

    def start(self, shape: EpochShape, epoch: int, position: int, epochs: int) -> None:
        """Training starts (or resumes) at ``epoch`` and ``position`` with ``shape``."""
        self.shape = shape
        if self._estimate:
            self.done = shape.steps_at(epoch, position)
        if self._loaded:
            self.reporter.resumed_at(self.done)
        self.epoch_started(epoch, position, epochs)

    def epoch_started(self, epoch: int, position: int, epochs: int) -> None:
        if epoch < epochs:  # a run resumed once every epoch is done trains none
            self.reporter.epoch.set(epoch)
        if self.shape is not None:
            self.reporter.total_steps.set(
                self.done + self.shape.steps_left(epoch, position, epochs)
            )

    def stepped(self) -> None:
        """One more optimizer step (counted as the host issues it)."""
        self.done += 1
        self.reporter.step.set(self.done)

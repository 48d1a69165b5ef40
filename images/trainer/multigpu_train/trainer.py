"""The one training loop, which every entrypoint runs: DataParallel, DDP and both pipelines.

Shaped like pytorch/examples' multigpu_torchrun.py and torchtitan's train.py: a Trainer
that runs a batch, an epoch, the whole training; beside it a CheckpointManager
(checkpoint_manager.py) saves its model, optimizer and progress and restores them.
What differs between the modes is the step (steps.py): how one batch becomes gradients
and predictions, and in which precision (precision.py).

Progress is (epoch, position): the epoch in progress and how many samples of its order
(sampling.py) the ranks together have trained. Checkpoints at an epoch's end have
position 0; ``--checkpoint-every-steps`` adds checkpoints within an epoch, from which a
restarted or rescaled job trains only the samples not yet trained.

The Trainer's ``model`` is the part of the model this process trains, unwrapped: the
whole model, or in a pipeline across ranks this rank's stage, or with ``--sharding``
the model whose blocks are sharded in place (sharding.py). Its parameters carry the
whole model's names in every case (split.py), so a whole-model checkpoint of any mode
loads into any other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sized
from dataclasses import dataclass, field

import torch
from torch import nn

from multigpu_train import devices, distributed, loaders, sharding
from multigpu_train.checkpoint_manager import CheckpointManager
from multigpu_train.config import TrainConfig
from multigpu_train.data import Data
from multigpu_train.distributed import CheckpointBarrier
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.step_count import EpochShape, StepCount, epoch_batches
from multigpu_train.step_window import StepWindow
from multigpu_train.steps import Step
from multigpu_train.world import World

log = logging.getLogger(__name__)

Batch = loaders.Batch


@dataclass(frozen=True)
class Run:
    """What a Trainer needs to know of its process; ``device`` receives the batches.

    ``barrier``: where the ranks wait for rank 0's checkpoint reads and writes
    (``distributed.init_process_group`` returns it; a lone process needs none).
    ``input_device``: where the inputs go when not to ``device`` (the targets' and
    outputs' device): an in-pod pipeline's first stage.
    """

    cfg: TrainConfig
    world: World
    device: torch.device
    metrics: TrainerMetrics
    barrier: CheckpointBarrier = field(default_factory=CheckpointBarrier)
    input_device: torch.device | None = None

    @property
    def inputs_to(self) -> torch.device:
        return self.input_device if self.input_device is not None else self.device


@dataclass(frozen=True)
class EpochResult:
    mean_loss: float
    samples: int
    seconds: float

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


class Trainer:
    """Trains ``model`` through ``step`` from the latest checkpoint to ``--epochs``."""

    def __init__(
        self,
        run: Run,
        model: nn.Module,
        step: Step,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        """``optimizer`` defaults to Adam at ``--lr``, what every entrypoint trains with."""
        self.run = run
        self.model = model
        self.step = step
        self.optimizer = (
            optimizer
            if optimizer is not None
            else torch.optim.Adam(model.parameters(), lr=run.cfg.lr)
        )
        # Where training stands: the epoch to run (or running), the samples of its order
        # already trained, and the seed of the shuffles.
        self.epoch = 0
        self.position = 0
        self.seed = run.cfg.seed
        # The job's optimizer steps, reported as its progress.
        self.count = StepCount(run.metrics.progress)
        # Where a step's work runs: a step's time is taken once they are all done.
        self.step_devices = devices.devices_of(model, run.device)
        # Saves all of the above, and restores it.
        self.checkpoints = CheckpointManager(self)

    # -- the loop ------------------------------------------------------------------

    def run_batch(
        self, x: torch.Tensor, y: torch.Tensor, *, optimizer_step: bool = True
    ) -> torch.Tensor | None:
        """Forward and backward of one batch, then an optimizer step unless this batch's
        gradients are to be accumulated with the next ones. The loss, where seen, as a
        tensor on the device: reading it waits for the GPU."""
        loss = self.step.forward_backward(
            x, y, loss_scale=1 / self.run.cfg.grad_accum_steps, sync=optimizer_step
        )
        if optimizer_step:
            # In fp16 unscaled first, and skipped if a gradient overflowed.
            self.step.precision.step(self.optimizer)
            self.optimizer.zero_grad(set_to_none=True)
            self.count.stepped()
        return loss

    def run_epoch(self, batches: Iterable[Batch]) -> EpochResult:
        """The rest of epoch ``self.epoch``: a pass over ``batches`` (at most
        ``--steps-per-epoch`` batches in the epoch); an optimizer step every
        ``--grad-accum-steps`` batches, and after the last one; a checkpoint every
        ``--checkpoint-every-steps`` optimizer steps. Afterwards training stands at the
        start of the next epoch.

        ``batches`` may start midway through the epoch (``self.position`` > 0): they are
        the epoch's remaining ones, and the batches before count against the cap.

        The host waits for the GPUs only every ``--sync-every-steps`` steps (and before a
        checkpoint and at the end): then it reads the losses of the steps since and
        observes each with the window's mean compute time. Waiting every step would
        leave the GPU idle while the host launches the next step's kernels.
        """
        cfg, device, metrics = self.run.cfg, self.run.device, self.run.metrics
        inputs_to = self.run.inputs_to
        available = len(batches) if isinstance(batches, Sized) else None
        done_before, limit, total = epoch_batches(
            self.position, cfg.batch_size * self._readers, cfg.steps_per_epoch, available
        )
        checkpoint_every = cfg.checkpoint_every_steps * cfg.grad_accum_steps
        self.model.train()
        losses: list[float] = []
        window = StepWindow()
        samples = index = 0
        started = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        it = iter(batches)
        while not cfg.steps_per_epoch or index < limit:
            t0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            x, y = x.to(inputs_to, non_blocking=True), y.to(device, non_blocking=True)
            t1 = time.perf_counter()
            in_epoch = done_before + index + 1  # this batch's number in the epoch, from 1
            last_of_group = in_epoch % cfg.grad_accum_steps == 0 or index + 1 == total
            loss = self.run_batch(x, y, optimizer_step=last_of_group)
            window.add(t0, len(y), t1 - t0, loss, last_of_group)
            samples += len(y)
            index += 1
            self.position += len(y) * self._readers
            checkpoint_now = (
                checkpoint_every
                and last_of_group
                and in_epoch % checkpoint_every == 0
                and index < total
            )
            if checkpoint_now or len(window.steps) >= cfg.sync_every_steps:
                losses += window.observe(self.step_devices, metrics)
            if checkpoint_now:
                self.checkpoints.save()
        losses += window.observe(self.step_devices, metrics)
        # The epoch is done: training stands at the start of the next one.
        self.epoch, self.position = self.epoch + 1, 0
        mean = sum(losses) / len(losses) if losses else float("nan")
        return EpochResult(mean, samples, time.perf_counter() - started)

    @torch.no_grad()
    def evaluate(self, batches: Iterable[Batch]) -> float:
        """Accuracy on the test batches of every rank together; logged and exported."""
        device, world = self.run.device, self.run.world
        self.model.eval()
        # A sharded forward gathers parameters from every rank, so every rank runs as
        # many: agreed before the first (a rank with a batch fewer runs one more,
        # uncounted, at the end).
        behind = 0
        if sharding.is_sharded(self.model) and isinstance(batches, Sized):
            behind = distributed.behind_most(len(batches), device)
        correct = total = 0
        last: Batch | None = None
        for x, y in batches:
            logits = self.step.predict(x.to(self.run.inputs_to), y.to(device))
            if logits is not None:
                correct += int((logits.argmax(dim=1).cpu() == y).sum())
                total += len(y)
            last = (x, y)
        if last is not None:
            for _ in range(behind):
                self.step.predict(last[0].to(self.run.inputs_to), last[1].to(device))
        accuracy = distributed.global_accuracy(correct, total, device)
        self.run.metrics.test_accuracy.set(accuracy)
        log.info("final test_accuracy=%.4f world_size=%d", accuracy, world.world_size)
        return accuracy

    def train(self, data: Data) -> float:
        """Train from the checkpoint's epoch (or the first) to ``--epochs``; the test accuracy."""
        cfg, world = self.run.cfg, self.run.world
        self.checkpoints.resume()
        train_batches, sampler, test_batches = loaders.make(
            data,
            cfg,
            world,
            self.seed,
            split_model=self.step.rank_stage is not None,
            pinned=self.run.inputs_to.type == "cuda",
        )
        samples: int = len(data.train)  # type: ignore[arg-type]
        shape = EpochShape.of(cfg, samples, self._readers, self.step.rank_stage is not None)
        self.count.start(shape, self.epoch, self.position, cfg.epochs)
        while self.epoch < cfg.epochs:
            self.count.epoch_started(self.epoch, self.position, cfg.epochs)
            # By epoch, or every epoch would shuffle the same way; from the position a
            # checkpoint within this epoch recorded.
            sampler.set_position(self.epoch, self.position)
            result = self.run_epoch(train_batches)
            if self._sees_loss:
                log.info(
                    "epoch %d/%d done: loss=%.4f samples/s=%.1f world_size=%d",
                    self.epoch,
                    cfg.epochs,
                    result.mean_loss,
                    result.samples_per_second,
                    world.world_size,
                )
            self.checkpoints.save()
        return self.evaluate(test_batches)

    @property
    def _sees_loss(self) -> bool:
        rank_stage = self.step.rank_stage
        return rank_stage is None or rank_stage.is_last

    @property
    def _readers(self) -> int:
        """Ranks that read different samples: every rank, or one for a split model."""
        return 1 if self.step.rank_stage is not None else self.run.world.world_size

"""The one training loop, which every entrypoint runs: DataParallel, DDP and both pipelines.

Shaped like pytorch/examples' multigpu_torchrun.py and torchtitan's train.py: a Trainer
that runs a batch, an epoch, the whole training, and turns its progress into a
checkpoint and back (state_dict / load_state_dict). What differs between the modes is
the step (steps.py): how one batch becomes gradients and predictions, and in which
precision (precision.py).

Progress is (epoch, position): the epoch in progress and how many samples of its order
(sampling.py) the ranks together have trained. Checkpoints at an epoch's end have
position 0; ``--checkpoint-every-steps`` adds checkpoints within an epoch, from which a
restarted or rescaled job trains only the samples not yet trained.

The Trainer's ``model`` is the part of the model this process trains, unwrapped: the
whole model, or in a pipeline across ranks this rank's stage. Its parameters carry the
whole model's names either way (split.py), so a checkpoint of any mode loads into any
other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sized
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from multigpu_train import checkpoint, devices, distributed
from multigpu_train.config import TrainConfig
from multigpu_train.data import Data
from multigpu_train.distributed import CheckpointBarrier
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.sampling import ResumableSampler
from multigpu_train.step_count import EpochShape, StepCount, epoch_batches
from multigpu_train.step_window import StepWindow
from multigpu_train.steps import Step
from multigpu_train.world import World

log = logging.getLogger(__name__)

Batch = tuple[torch.Tensor, ...]
Loader = DataLoader[Batch]


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

    # -- checkpoints ---------------------------------------------------------------

    def state_dict(self) -> checkpoint.State | None:
        """The checkpoint as rank 0 writes it (checkpoint.py); None on other ranks.

        In a pipeline across ranks every rank must call it: rank 0 gathers the stages'
        weights into the whole model's state_dict and their optimizer states into a
        list, one per stage.
        """
        world = self.run.world
        model: checkpoint.State
        optimizer: checkpoint.State | list[checkpoint.State]
        if self.step.rank_stage is None:
            if world.rank != 0:
                return None
            model, optimizer = self.model.state_dict(), self.optimizer.state_dict()
        else:
            stages = self._gather_stages()
            if stages is None:
                return None
            model = {name: value for stage in stages for name, value in stage["model"].items()}
            optimizer = [stage["optimizer"] for stage in stages]
        return checkpoint.make_state(
            epoch=self.epoch,
            model=model,
            optimizer=optimizer,
            seed=self.seed,
            world_size=world.world_size,
            step=self.count.done,
            position=self.position,
            # Equal on every stage of a pipeline: their scalers skip steps together.
            grad_scaler=self.step.precision.state_dict(),
        )

    def _gather_stages(self) -> list[checkpoint.State] | None:
        """Every stage's weights and optimizer state, on rank 0 only.

        Copied to the CPU before they are sent, over the checkpoint group (gloo): a
        tensor pickled on GPU i is unpickled by rank 0 onto its own GPU i, a device of
        another process (an extra CUDA context there, an error in EXCLUSIVE_PROCESS
        mode), and objects sent over NCCL are staged through GPU memory.
        """
        mine = {
            "model": checkpoint.on_cpu(self.model.state_dict()),
            "optimizer": checkpoint.on_cpu(self.optimizer.state_dict()),
        }
        return self.run.barrier.gather(mine)

    def load_state_dict(self, state: checkpoint.State) -> None:
        """Continue where ``state`` stopped: weights, optimizer, gradient scale, epoch,
        position in it and shuffle seed."""
        rank_stage = self.step.rank_stage
        weights = state["model"]
        if rank_stage is not None:
            weights = {name: weights[name] for name in self.model.state_dict()}
        self.model.load_state_dict(weights)
        optimizer = checkpoint.optimizer_share(state["optimizer"], rank_stage)
        if optimizer is not None:
            self.optimizer.load_state_dict(optimizer)
        else:
            # Written by another layout (another stage count, or a whole-model mode):
            # the weights still fit, the optimizer's moments do not.
            log.warning(
                "checkpoint optimizer state does not match %s; starting it afresh",
                f"{rank_stage.count} stages" if rank_stage else "a whole model",
            )
        self.step.precision.load_state_dict(state.get("grad_scaler"))
        self.epoch = int(state["epoch"])
        self.position = checkpoint.position_of(state)
        self.seed = int(state["sampler"]["seed"])
        self.count.loaded(checkpoint.step_of(state))

    def resume(self) -> None:
        """Load the latest checkpoint, when there is one: rank 0 reads it for everyone.

        The others wait at the checkpoint barrier while it reads (its own timeout), then
        receive it over the checkpoint group: the whole of it where every rank holds the
        whole model, else this stage's share only.
        """
        cfg, world, barrier = self.run.cfg, self.run.world, self.run.barrier
        if cfg.checkpoint_dir is None:
            return
        with self.run.metrics.progress.checkpointing():  # the others' waits too
            state = checkpoint.load_on_rank0(cfg.checkpoint_dir, world.rank)
            barrier.wait("reading")
            rank_stage = self.step.rank_stage
            if rank_stage is None:
                state = barrier.broadcast(state)
            else:
                names = barrier.gather(list(self.model.state_dict()))
                shares = None
                if names is not None:  # rank 0
                    shares = [
                        checkpoint.stage_share(state, stage_names, i, len(names))
                        if state is not None
                        else None
                        for i, stage_names in enumerate(names)
                    ]
                state = barrier.scatter(shares)
            if state is None:
                return
            self.load_state_dict(state)
        self.run.metrics.checkpointed(float(state["saved_at"]))
        log.info(
            "resumed from epoch %d%s (checkpoint of world size %d, now %d)",
            self.epoch,
            f" at sample {self.position}" if self.position else "",
            state["world_size"],
            world.world_size,
        )

    def save_checkpoint(self) -> None:
        """Rank 0 writes the checkpoint; every rank returns once it is written.

        Every rank must call it (a pipeline gathers its stages), with the same
        ``--checkpoint-dir`` set or unset. The others wait at the checkpoint barrier,
        not in the next collective, whose timeout is meant for peers that died.
        """
        directory = self.run.cfg.checkpoint_dir
        if directory is None:
            return
        with self.run.metrics.progress.checkpointing():  # the others' waits too
            state = self.state_dict()
            if state is not None:
                saved_at = checkpoint.save_on_rank0(self.run.world.rank, directory, state)
                if saved_at is not None:
                    self.run.metrics.checkpointed(saved_at)
            self.run.barrier.wait("writing")

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
                self.save_checkpoint()
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
        correct = total = 0
        for x, y in batches:
            logits = self.step.predict(x.to(self.run.inputs_to), y.to(device))
            if logits is not None:
                correct += int((logits.argmax(dim=1).cpu() == y).sum())
                total += len(y)
        accuracy = distributed.global_accuracy(correct, total, device)
        self.run.metrics.test_accuracy.set(accuracy)
        log.info("final test_accuracy=%.4f world_size=%d", accuracy, world.world_size)
        return accuracy

    def train(self, data: Data) -> float:
        """Train from the checkpoint's epoch (or the first) to ``--epochs``; the test accuracy."""
        cfg, world = self.run.cfg, self.run.world
        self.resume()
        train_batches, sampler, test_batches = self._loaders(data)
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
            self.save_checkpoint()
        return self.evaluate(test_batches)

    @property
    def _sees_loss(self) -> bool:
        rank_stage = self.step.rank_stage
        return rank_stage is None or rank_stage.is_last

    @property
    def _readers(self) -> int:
        """Ranks that read different samples: every rank, or one for a split model."""
        return 1 if self.step.rank_stage is not None else self.run.world.world_size

    def _loaders(self, data: Data) -> tuple[Loader, ResumableSampler, Loader]:
        """This rank's training batches, their sampler, and its test batches.

        Ranks that hold the whole model share the data out (DDP; a process alone
        reads all of it). The stages of a pipeline across ranks all read every batch in the same
        order, and whole batches only: the schedule fixes micro-batch shapes at its
        first step.
        """
        world = self.run.world
        split_model = self.step.rank_stage is not None
        readers, reader = (1, 0) if split_model else (world.world_size, world.rank)
        # Shuffled by (seed, epoch) alone: the same order on every stage and after a resume.
        sampler = ResumableSampler(data.train, readers, reader, self.seed)  # type: ignore[arg-type]
        # Every reader scores a disjoint share of the test split; the counts are summed.
        test_share = Subset(data.test, range(reader, len(data.test), readers))  # type: ignore[arg-type]
        return (
            self._loader(data.train, sampler, drop_last=split_model),
            sampler,
            self._loader(test_share, None, drop_last=split_model),
        )

    def _loader(
        self, dataset: Dataset[Batch], sampler: ResumableSampler | None, *, drop_last: bool
    ) -> Loader:
        cfg = self.run.cfg
        return DataLoader(
            dataset,
            batch_size=cfg.batch_size,
            sampler=sampler,
            drop_last=drop_last,
            num_workers=cfg.data_workers,
            pin_memory=self.run.inputs_to.type == "cuda",
            # Workers start once, not every epoch.
            persistent_workers=cfg.data_workers > 0,
        )

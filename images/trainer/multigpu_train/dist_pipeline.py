"""Pipeline parallelism across processes: stage = RANK, with torch.distributed.pipelining.

Every rank builds the whole model from the same seed and keeps only its stage (fine
for the models here; a model too big for one process would be built on the meta
device instead). All ranks read the same batches in the same order (the Trainer gives
every stage the whole data set).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.pipelining.schedules import PipelineScheduleSingle

from multigpu_train.config import TrainConfig
from multigpu_train.errors import SetupError
from multigpu_train.precision import Precision
from multigpu_train.split import split
from multigpu_train.steps import RankStage

SCHEDULES: dict[str, type[PipelineScheduleSingle]] = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}


def check(cfg: TrainConfig, world_size: int) -> None:
    """The pipeline's own rules, checked before any rank waits on another."""
    if cfg.stages not in (0, world_size):
        raise SetupError(
            f"MGJ_PIPELINE_STAGES={cfg.stages} but WORLD_SIZE={world_size}: across ranks "
            "each process is one stage, so they must be equal"
        )
    if cfg.schedule == "1F1B" and cfg.micro_batches < world_size:
        raise SetupError(
            f"the 1F1B schedule needs at least as many micro-batches as stages: "
            f"MGJ_MICRO_BATCHES={cfg.micro_batches} < {world_size} stages"
        )
    if cfg.batch_size % cfg.micro_batches:
        raise SetupError(
            f"--batch-size {cfg.batch_size} is not a multiple of MGJ_MICRO_BATCHES="
            f"{cfg.micro_batches}: every micro-batch must have the same shape"
        )


def own_stage(model: nn.Sequential, rank: int, ranks: int, device: torch.device) -> nn.Sequential:
    """This rank's stage of the whole model, under the whole model's parameter names."""
    return split(model, ranks)[rank].to(device)


class MicroBatchLoss:
    """The schedule's loss function: cross-entropy in fp32, scaled for an fp16 backward.

    The schedule calls backward on what this returns, so it must be the scaled loss.
    (It also calls it on uninitialised tensors to learn shapes at its first step, so
    what it is called with is no record of the losses: the schedule's own list is.)
    """

    def __init__(self, precision: Precision) -> None:
        self.precision = precision
        self.cross_entropy = nn.CrossEntropyLoss()

    def __call__(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.precision.scale(self.cross_entropy(output.float(), target))


class ScheduleStep:
    """A batch through this rank's stage of a GPipe or 1F1B schedule.

    Rank 0 feeds the inputs, the last rank the targets; the schedule moves activations
    and gradients between them, so only the last rank sees the loss and the logits.
    With mixed precision the stage's forward runs under autocast (activations travel
    in bf16 or fp16); in fp16 the last rank scales the loss and every stage's scaler
    agrees on skipping a step (``precision`` is made with ``shared_by`` the group).
    """

    def __init__(
        self,
        stage: nn.Module,
        rank: int,
        ranks: int,
        device: torch.device,
        micro_batches: int,
        schedule: str,
        precision: Precision | None = None,
    ) -> None:
        self.rank_stage = RankStage(rank, ranks)
        self.device = device
        self.precision = precision if precision is not None else Precision()
        pipeline_stage = PipelineStage(self.precision.wrap(stage), rank, ranks, device)
        self.loss_fn = MicroBatchLoss(self.precision)
        # The loss is a mean per micro-batch; the schedule divides the summed gradients by
        # the number of micro-batches (scale_grads), giving the whole batch's mean.
        self.schedule = SCHEDULES[schedule](pipeline_stage, micro_batches, loss_fn=self.loss_fn)

    def forward_backward(
        self, x: torch.Tensor, y: torch.Tensor, *, loss_scale: float = 1.0, sync: bool = True
    ) -> torch.Tensor | None:
        # ``sync`` has nothing to do here: every stage has one copy, no replicas to reduce.
        if loss_scale != 1.0:
            # scale_grads also divides gradients left from an earlier batch.
            raise ValueError("gradient accumulation is not supported across pipeline ranks")
        self.precision.prepare(self.device)
        losses: list[torch.Tensor] = []
        if self.rank_stage.is_first:
            self.schedule.step(x)
        elif self.rank_stage.is_last:
            self.schedule.step(target=y, losses=losses)
        else:
            self.schedule.step()
        if not self.rank_stage.is_last:
            return None
        scaled = torch.stack([loss.detach() for loss in losses]).mean()
        # The scale of this step: the optimizer step updates it afterwards.
        return self.precision.unscaled(scaled)

    def predict(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        # The last rank needs the targets: the schedule computes its loss whenever it
        # has a loss function.
        if self.rank_stage.is_first:
            self.schedule.eval(x)
            return None
        if not self.rank_stage.is_last:
            self.schedule.eval()
            return None
        output: torch.Tensor = self.schedule.eval(target=y)
        return output

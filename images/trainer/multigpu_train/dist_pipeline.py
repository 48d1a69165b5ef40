"""Pipeline parallelism across processes: stage = RANK, with torch.distributed.pipelining.

Every rank builds the whole model from the same seed and keeps only its stage (fine
for the models here; a model too big for one process would be built on the meta
device instead). All ranks read the same batches in the same order: rank 0 feeds the
inputs, the last rank the targets, and the schedule (GPipe or 1F1B) moves
activations and gradients between them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.pipelining.schedules import PipelineScheduleSingle

from multigpu_train import checkpoint
from multigpu_train.config import TrainConfig
from multigpu_train.errors import SetupError
from multigpu_train.split import split

log = logging.getLogger(__name__)

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


@dataclass
class Stage:
    module: nn.Sequential
    schedule: PipelineScheduleSingle
    rank: int
    world_size: int

    @property
    def is_first(self) -> bool:
        return self.rank == 0

    @property
    def is_last(self) -> bool:
        return self.rank == self.world_size - 1


def make_stage(
    model: nn.Sequential,
    rank: int,
    world_size: int,
    device: torch.device,
    micro_batches: int,
    schedule: str,
) -> Stage:
    module = split(model, world_size)[rank].to(device)
    pipeline_stage = PipelineStage(module, rank, world_size, device)
    # The loss is a mean per micro-batch; the schedule divides the summed gradients by
    # the number of micro-batches (scale_grads), giving the whole batch's mean.
    runner = SCHEDULES[schedule](pipeline_stage, micro_batches, loss_fn=nn.CrossEntropyLoss())
    return Stage(module, runner, rank, world_size)


def step(stage: Stage, x: torch.Tensor, y: torch.Tensor) -> float | None:
    """One forward and backward of the whole batch; the mean loss on the last rank."""
    losses: list[torch.Tensor] = []
    if stage.is_first:
        stage.schedule.step(x)
    elif stage.is_last:
        stage.schedule.step(target=y, losses=losses)
    else:
        stage.schedule.step()
    if not stage.is_last:
        return None
    return float(torch.stack([loss.detach() for loss in losses]).mean())


def predict(stage: Stage, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """Forward only; the logits on the last rank (which needs the targets: the
    schedule computes its loss whenever it has a loss function)."""
    if stage.is_first:
        stage.schedule.eval(x)
        return None
    if not stage.is_last:
        stage.schedule.eval()
        return None
    output: torch.Tensor = stage.schedule.eval(target=y)
    return output


def gather_state(stage: Stage, optimizer: torch.optim.Optimizer) -> list[Any] | None:
    """Every stage's model and optimizer state, on rank 0 only."""
    mine = {
        "model": {k: v.cpu() for k, v in stage.module.state_dict().items()},
        "optimizer": optimizer.state_dict(),
    }
    gathered: list[Any] | None = [None] * stage.world_size if stage.rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    return gathered


def save(
    stage: Stage, optimizer: torch.optim.Optimizer, directory: Any, epoch: int, seed: int
) -> float | None:
    parts = gather_state(stage, optimizer)
    if parts is None:
        return None
    whole: dict[str, torch.Tensor] = {}
    for part in parts:
        whole.update(part["model"])
    state = checkpoint.make_state(
        epoch=epoch,
        model=whole,
        optimizer=[part["optimizer"] for part in parts],
        seed=seed,
        world_size=stage.world_size,
    )
    return checkpoint.save_on_rank0(0, directory, state)


def restore(stage: Stage, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load this stage's share of a whole-model checkpoint."""
    names = stage.module.state_dict().keys()
    stage.module.load_state_dict({k: state["model"][k] for k in names})
    optimizers = state["optimizer"]
    if isinstance(optimizers, list) and len(optimizers) == stage.world_size:
        optimizer.load_state_dict(optimizers[stage.rank])
    else:
        # Written by another layout (a different stage count, or DDP): the weights
        # still fit, the optimizer's moments do not.
        log.warning(
            "checkpoint optimizer state does not match %d stages; starting it afresh",
            stage.world_size,
        )

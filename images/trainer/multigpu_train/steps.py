"""How one batch becomes gradients and predictions: the part of training that differs by mode.

The Trainer (trainer.py) owns the loop, the optimizer and the checkpoints; a step owns
only the forward and backward of a batch. Two kinds cover every mode:

- ``ForwardBackward``: loss and backward through a module that wraps the model, namely
  ``nn.DataParallel``, ``DistributedDataParallel``, the in-pod ``LocalPipeline``, or
  the model itself sharded in place (``fully_shard``, sharding.py).
- ``ScheduleStep`` (dist_pipeline.py): a torch.distributed.pipelining schedule, one
  stage per rank; only the last rank sees the loss and the outputs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule
from torch.nn.parallel import DistributedDataParallel

from multigpu_train.precision import Precision


@dataclass(frozen=True)
class RankStage:
    """This process holds pipeline stage ``index`` of ``count``, one stage per rank."""

    index: int
    count: int

    @property
    def is_first(self) -> bool:
        return self.index == 0

    @property
    def is_last(self) -> bool:
        return self.index == self.count - 1


class Step(Protocol):
    @property
    def rank_stage(self) -> RankStage | None:
        """None: this process holds the whole model; else the pipeline stage it holds."""
        ...

    @property
    def precision(self) -> Precision:
        """How the forward runs and the loss is scaled; the Trainer steps the optimizer
        through it and keeps its state in the checkpoint."""
        ...

    def forward_backward(
        self, x: torch.Tensor, y: torch.Tensor, *, loss_scale: float, sync: bool
    ) -> torch.Tensor | None:
        """Add the gradients of ``loss_scale`` x the batch's mean loss to ``.grad``
        (times the fp16 gradient scale, which the optimizer step takes out again).

        Returns the (unscaled) mean loss, or None on a rank that does not compute it:
        a tensor on the device, so that returning it does not wait for the GPU.
        ``sync`` False: keep the gradients local, an optimizer step does not follow.
        """
        ...

    def predict(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        """The logits of a batch, or None on a rank that does not compute them."""
        ...


class ForwardBackward:
    """Loss and backward through ``forward``: the model itself or a wrapper of it.

    ``evaluate`` scores the test batches (default ``forward``). DDP passes its inner
    module there: a DDP forward may start collectives, and the ranks score different
    numbers of test batches. With mixed precision both come already wrapped by
    ``precision.wrap``; the loss is computed in fp32 from the logits.
    """

    rank_stage: RankStage | None = None

    def __init__(
        self,
        forward: nn.Module,
        evaluate: nn.Module | None = None,
        precision: Precision | None = None,
    ) -> None:
        self.forward = forward
        self.evaluate = evaluate if evaluate is not None else forward
        self.precision = precision if precision is not None else Precision()
        self.loss_fn = nn.CrossEntropyLoss()

    def _gradients_stay_local(self, sync: bool) -> contextlib.AbstractContextManager[None]:
        # Gradient accumulation under DDP: no all-reduce until the last batch of a step.
        # The forward must run inside no_sync too, or DDP still synchronises.
        if not sync and isinstance(self.forward, DistributedDataParallel):
            return self.forward.no_sync()
        # Sharded: no reduce-scatter either (the unsharded gradients are kept meanwhile).
        if isinstance(self.forward, FSDPModule):
            self.forward.set_requires_gradient_sync(sync)
        return contextlib.nullcontext()

    def forward_backward(
        self, x: torch.Tensor, y: torch.Tensor, *, loss_scale: float, sync: bool
    ) -> torch.Tensor | None:
        with self._gradients_stay_local(sync):
            loss = self.loss_fn(self.forward(x).float(), y)
            self.precision.scale(loss * loss_scale).backward()  # type: ignore[no-untyped-call]
        detached: torch.Tensor = loss.detach()
        return detached

    def predict(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        logits: torch.Tensor = self.evaluate(x)
        return logits

"""Mixed precision: fp32, bf16 autocast, or fp16 autocast with a gradient scaler.

The model's forward runs under ``torch.autocast``; the loss (in fp32) and the backward
run outside it, as PyTorch's AMP recipe says. The autocast is entered inside the
forward (``Precision.wrap``), not around the step: ``nn.DataParallel`` runs its
replicas in threads of their own, where an autocast entered by the caller would come
back with the device's default dtype (fp16 on CUDA) instead of the one asked for, and a
pipeline schedule runs both the forward and the backward inside one call.

fp16 needs a gradient scaler: the loss is multiplied by a scale before the backward so
small gradients survive fp16, and the optimizer step is skipped (and the scale halved)
whenever a gradient overflowed. Every rank must take the same decision. Under DDP the
gradients are all-reduced, so every rank sees the same overflow; the stages of a
pipeline across ranks hold different gradients, so their scaler all-reduces the
overflow flag (``ShardedGradScaler``, which does exactly that over a process group).
The scaler's state belongs in the checkpoint, or a resumed fp16 job would start from
the initial scale again.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

from multigpu_train.errors import SetupError

log = logging.getLogger(__name__)

DTYPES: dict[str, torch.dtype | None] = {
    "fp32": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


class AutocastForward(nn.Module):
    """``module``'s forward under autocast, in whichever thread or schedule calls it."""

    def __init__(self, module: nn.Module, device_type: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.module = module
        self.device_type = device_type
        self.dtype = dtype

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with torch.autocast(self.device_type, dtype=self.dtype):
            return self.module(*args, **kwargs)


class Precision:
    """How a step runs its forward and scales its backward, and how the optimizer steps.

    ``shared_by`` is the process group whose ranks hold parts of one model (a pipeline
    across ranks): their fp16 overflow checks are combined. None: every rank holds the
    whole model, or there is one process.
    """

    def __init__(
        self,
        name: str = "fp32",
        device_type: str = "cpu",
        shared_by: dist.ProcessGroup | None = None,
    ) -> None:
        if name not in DTYPES:
            raise SetupError(f"unknown precision {name!r}: expected one of {', '.join(DTYPES)}")
        self.name = name
        self.device_type = device_type
        self.dtype = DTYPES[name]
        fp16 = name == "fp16"
        self.scaler: torch.amp.GradScaler = (
            ShardedGradScaler(device_type, enabled=fp16, process_group=shared_by)
            if shared_by is not None
            else torch.amp.GradScaler(device_type, enabled=fp16)
        )

    @property
    def scales_loss(self) -> bool:
        return self.scaler.is_enabled()

    def wrap(self, module: nn.Module) -> nn.Module:
        """``module`` with its forward under autocast; ``module`` itself in fp32."""
        if self.dtype is None:
            return module
        return AutocastForward(module, self.device_type, self.dtype)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast for code that is not a module's forward (a benchmark's loop)."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss to call backward on: scaled in fp16, as is otherwise."""
        return self.scaler.scale(loss)

    def prepare(self, device: torch.device) -> None:
        """Make the scale exist on a rank that never scales a loss itself.

        Pipeline stages before the last receive gradients already scaled by the last
        stage; their scaler still unscales them and so needs its scale, which a scaler
        creates on its first ``scale`` call.
        """
        if self.scales_loss:
            self.scaler.scale(torch.zeros((), device=device))

    def unscaled(self, loss: torch.Tensor) -> torch.Tensor:
        """A scaled loss divided by this step's scale, without waiting for the GPU
        (``GradScaler.get_scale`` would: it reads the scale back to the host)."""
        if not self.scales_loss:
            return loss
        # The scale tensor itself; the public getter returns a float.
        scale = self.scaler._get_scale_async()
        return loss if scale is None else loss / scale

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer step; in fp16 unscaled, skipped after an overflow, the scale updated."""
        self.scaler.step(optimizer)
        self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state: the scale and its growth tracker; empty unless fp16."""
        return self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if not self.scales_loss:
            return
        if not state:
            log.warning("checkpoint holds no fp16 gradient scale; starting from the initial one")
            return
        self.scaler.load_state_dict(state)


def set_tf32(enabled: bool, device: torch.device) -> None:
    """fp32 matmuls and convolutions in TF32 on a GPU that has it (compute capability
    8.0 and up; older ones ignore it): about 8x the fp32 matmul rate on an A100 or H100,
    with a 10-bit mantissa in the products (accumulation stays fp32). PyTorch's own
    default is off for matmuls; ``--tf32 false`` (MGJ_TF32=false) keeps full fp32. The
    CPU is left alone."""
    if device.type != "cuda":
        return
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    torch.backends.cudnn.allow_tf32 = enabled


def check_supported(name: str, device: torch.device) -> None:
    """bf16 needs the CPU or a GPU that computes in it: compute capability 8.0 and up."""
    if name != "bf16" or device.type != "cuda":
        return
    major, minor = torch.cuda.get_device_capability(device)
    if major < 8:
        raise SetupError(
            f"MGJ_PRECISION=bf16 but {torch.cuda.get_device_name(device)} (compute capability "
            f"{major}.{minor}) has no bf16 arithmetic (it needs 8.0 or later: A100, H100, L4, "
            "...): use fp16 (with its gradient scaler) or fp32"
        )

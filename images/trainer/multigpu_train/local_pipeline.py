"""Model parallelism inside one process: stages on different devices, micro-batches
interleaved so that the devices work at the same time.

CUDA kernels launch asynchronously, so issuing stage s for micro-batch j and then
stage s-1 for micro-batch j+1 keeps both GPUs busy (the wavefront of the PyTorch
model-parallel tutorial, for any number of stages). Autograd follows the tensors
across devices, so backward needs nothing special. On the CPU every stage runs on the
"cpu" device: the same code and numbers, without the overlap.
"""

from __future__ import annotations

import torch
from torch import nn

from multigpu_train.split import split


class LocalPipeline(nn.Module):
    """``model`` cut into one stage per entry of ``devices``, each stage moved there.

    A wrapper like nn.DataParallel: the stages are the model's own layers, so training
    through the pipeline trains ``model``, whose state_dict stays the checkpoint's.
    """

    def __init__(
        self, model: nn.Sequential, devices: list[torch.device], micro_batches: int
    ) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            stage.to(device)
            for stage, device in zip(split(model, len(devices)), devices, strict=True)
        )
        self.devices = devices
        self.micro_batches = micro_batches

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chunks = list(x.tensor_split(min(self.micro_batches, len(x))))
        count, depth = len(chunks), len(self.stages)
        # Tick t runs stage s on micro-batch t - s: a diagonal wavefront.
        for tick in range(count + depth - 1):
            for s in reversed(range(depth)):
                j = tick - s
                if 0 <= j < count:
                    chunks[j] = self.stages[s](chunks[j].to(self.devices[s], non_blocking=True))
        return torch.cat(chunks)


def stage_devices(stages: int, visible: list[torch.device]) -> list[torch.device]:
    """Stage s on device s mod G (docs/env-contract.md), or all on the CPU."""
    return [visible[s % len(visible)] for s in range(stages)]

"""The steps a trainer ran since its host last waited for the GPUs (--sync-every-steps):
waiting every step would leave the GPU idle while the host launches the next kernels, so
the steps are observed together, each with the window's mean compute time."""

from __future__ import annotations

import time
from typing import Any

import torch

from multigpu_train import devices
from multigpu_train.metrics import TrainerMetrics


class StepWindow:
    """Steps run since the host last waited for the GPUs: their start, samples, data
    wait, loss (a tensor on the device until read) and whether each ended an optimizer
    step."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, float, torch.Tensor | None, bool]] = []
        self.started = 0.0

    def add(
        self,
        started: float,
        samples: int,
        data_seconds: float,
        loss: Any,
        optimizer_step: bool = True,
    ) -> None:
        if not self.steps:
            self.started = started
        self.steps.append((samples, data_seconds, loss, optimizer_step))

    def observe(self, step_devices: list[torch.device], metrics: TrainerMetrics) -> list[float]:
        """Wait for the GPUs, observe every step of the window, and return its losses.

        Kernels run asynchronously: without the wait, a stage that never reads its loss
        back would time kernel launches, not the steps."""
        devices.synchronize(step_devices)
        if not self.steps:
            return []
        elapsed = time.perf_counter() - self.started
        waited = sum(data for _, data, _, _ in self.steps)
        compute = max(elapsed - waited, 0.0) / len(self.steps)
        losses = []
        for samples, data_seconds, loss, optimizer_step in self.steps:
            value = None if loss is None else float(loss)
            metrics.observe_step(samples, data_seconds, compute, value, optimizer_step)
            if value is not None:
                losses.append(value)
        self.steps = []
        return losses

"""The fixed batch and model every gradient test uses, built the same in each process."""

from __future__ import annotations

import torch
from torch import nn

from multigpu_train import data, models
from multigpu_train.config import TrainConfig

SEED = 0


def digits_batch(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``size`` training digits: the same on every rank."""
    train = data.digits().train
    xs, ys = zip(*(train[i] for i in range(size)), strict=True)
    return torch.stack(xs), torch.stack(ys)


def model(kind: str = "cnn") -> nn.Sequential:
    cfg = TrainConfig(
        seed=SEED, model=kind, transformer_layers=2, transformer_dim=32, transformer_heads=2
    )
    return models.build(cfg, (1, 8, 8), 10)


def reference_grads(
    net: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and gradients of one process on the whole batch: what splits must match."""
    net.zero_grad()
    loss = nn.functional.cross_entropy(net(x), y)
    loss.backward()  # type: ignore[no-untyped-call]
    return float(loss.detach()), {
        n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None
    }

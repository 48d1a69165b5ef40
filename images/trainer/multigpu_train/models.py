"""The models: a small CNN, and a transformer block stack whose size is configurable.

Both are ``nn.Sequential`` so that a pipeline can cut them between layers. Neither uses
batch norm or dropout: a split or data-parallel run then computes exactly what one
process would, which the tests check.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from multigpu_train.config import TrainConfig


def small_cnn(sample_shape: tuple[int, ...], classes: int) -> nn.Sequential:
    channels = sample_shape[0]
    return nn.Sequential(
        nn.Conv2d(channels, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=3, padding=1),
        nn.ReLU(),
        # Any image size maps to 4x4, so the classifier's size is fixed.
        nn.AdaptiveAvgPool2d((4, 4)),
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, 128),
        nn.ReLU(),
        nn.Linear(128, classes),
    )


class ToSequence(nn.Module):
    """An image CxHxW as a sequence of H rows of C*W features; sequences pass through."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 4:
            batch, channels, height, width = x.shape
            return x.permute(0, 2, 1, 3).reshape(batch, height, channels * width)
        return x


class PositionEmbedding(nn.Module):
    def __init__(self, length: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(length, dim) / math.sqrt(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.weight[: x.shape[1]]


class MeanOverSequence(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=1)


def _sequence_shape(sample_shape: tuple[int, ...]) -> tuple[int, int]:
    if len(sample_shape) == 3:
        channels, height, width = sample_shape
        return height, channels * width
    if len(sample_shape) == 2:
        return sample_shape[0], sample_shape[1]
    raise ValueError(f"the transformer needs CxHxW or SxF samples, not {sample_shape}")


def transformer(
    sample_shape: tuple[int, ...], classes: int, dim: int, layers: int, heads: int
) -> nn.Sequential:
    length, features = _sequence_shape(sample_shape)
    blocks = [
        nn.TransformerEncoderLayer(
            dim, heads, dim_feedforward=4 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        for _ in range(layers)
    ]
    return nn.Sequential(
        ToSequence(),
        nn.Linear(features, dim),
        PositionEmbedding(length, dim),
        *blocks,
        MeanOverSequence(),
        nn.LayerNorm(dim),
        nn.Linear(dim, classes),
    )


def build(cfg: TrainConfig, sample_shape: tuple[int, ...], classes: int) -> nn.Sequential:
    """The model for the flags, with weights from ``cfg.seed``: equal on every rank."""
    torch.manual_seed(cfg.seed)
    if cfg.model == "transformer":
        return transformer(
            sample_shape,
            classes,
            cfg.transformer_dim,
            cfg.transformer_layers,
            cfg.transformer_heads,
        )
    return small_cnn(sample_shape, classes)

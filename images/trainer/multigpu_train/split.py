"""Cutting an ``nn.Sequential`` into contiguous stages for pipelining.

A stage keeps the layer names of the whole model ("3.weight", not "0.weight"), so the
stages' state_dicts together are exactly the whole model's: checkpoints stay
interchangeable between split and unsplit runs.
"""

from __future__ import annotations

from collections import OrderedDict

from torch import nn

from multigpu_train.errors import SetupError


def _params(layer: nn.Module) -> int:
    return sum(p.numel() for p in layer.parameters())


def boundaries(layer_sizes: list[int], stages: int) -> list[int]:
    """Start index of each stage: contiguous, non-empty, parameters spread evenly.

    Greedy: a stage ends once it holds its share of what is left; layers without
    parameters count as one so that they are spread too.
    """
    if not 1 <= stages <= len(layer_sizes):
        raise SetupError(
            f"cannot cut a model of {len(layer_sizes)} layers into {stages} pipeline stages"
        )
    weights = [max(size, 1) for size in layer_sizes]
    starts = [0]
    index = 0
    for stage in range(stages - 1):
        remaining_stages = stages - stage
        share = sum(weights[index:]) / remaining_stages
        taken = 0
        # Leave at least one layer for each later stage.
        last_allowed = len(weights) - (remaining_stages - 1)
        while index < last_allowed and (taken == 0 or taken + weights[index] / 2 <= share):
            taken += weights[index]
            index += 1
        starts.append(index)
    return starts


def split(model: nn.Sequential, stages: int) -> list[nn.Sequential]:
    layers = list(model.named_children())
    starts = boundaries([_params(layer) for _, layer in layers], stages)
    ends = [*starts[1:], len(layers)]
    return [nn.Sequential(OrderedDict(layers[a:b])) for a, b in zip(starts, ends, strict=True)]

"""Cutting an ``nn.Sequential`` into contiguous stages for pipelining.

A stage keeps the layer names of the whole model ("3.weight", not "0.weight"), so the
stages' state_dicts together are exactly the whole model's: checkpoints stay
interchangeable between split and unsplit runs.

Cuts fall only before layers with parameters: a stage made only of parameter-free
layers (an activation, a pooling) would give its optimizer an empty parameter list, and
Adam refuses one. A parameter-free layer stays with the layer before it.
"""

from __future__ import annotations

from collections import OrderedDict

from torch import nn

from multigpu_train.errors import SetupError


def _params(layer: nn.Module) -> int:
    return sum(p.numel() for p in layer.parameters())


def boundaries(layer_sizes: list[int], stages: int) -> list[int]:
    """Start index of each stage: contiguous, each with parameters, spread evenly.

    The layers are grouped into runs that start at a layer with parameters (the first
    run also takes any parameter-free layers before it); a stage is one or more whole
    runs. Greedy: a stage ends once it holds its share of what is left.
    """
    with_params = [i for i, size in enumerate(layer_sizes) if size > 0]
    if not 1 <= stages <= len(with_params):
        raise SetupError(
            f"cannot cut a model of {len(layer_sizes)} layers, {len(with_params)} of them "
            f"with parameters, into {stages} pipeline stages: every stage needs a layer with "
            f"parameters, so at most {len(with_params)} stages (fewer ranks, "
            "MGJ_PIPELINE_STAGES, or a deeper model such as more --transformer-layers)"
        )
    run_starts = [0, *with_params[1:]]
    run_ends = [*run_starts[1:], len(layer_sizes)]
    weights = [sum(layer_sizes[a:b]) for a, b in zip(run_starts, run_ends, strict=True)]
    starts = [0]
    index = 0
    for stage in range(stages - 1):
        remaining_stages = stages - stage
        share = sum(weights[index:]) / remaining_stages
        taken = 0
        # Leave at least one run for each later stage.
        last_allowed = len(weights) - (remaining_stages - 1)
        while index < last_allowed and (taken == 0 or taken + weights[index] / 2 <= share):
            taken += weights[index]
            index += 1
        starts.append(run_starts[index])
    return starts


def split(model: nn.Sequential, stages: int) -> list[nn.Sequential]:
    layers = list(model.named_children())
    starts = boundaries([_params(layer) for _, layer in layers], stages)
    ends = [*starts[1:], len(layers)]
    return [nn.Sequential(OrderedDict(layers[a:b])) for a, b in zip(starts, ends, strict=True)]

"""A model's repeated blocks, and what is applied to each: activation checkpointing,
``torch.compile``, and (sharding.py) ``fully_shard``, in that order, as torchtitan does.

Both are changes to a block's ``forward`` only, not wrappers around the block: the
parameters keep their names, so a checkpoint written with them on loads with them off
and the other way round, whatever the mode.

- Activation checkpointing (``--activation-checkpointing``): a block keeps only its
  input for the backward and runs its forward again there
  (``torch.utils.checkpoint``, non-reentrant): activation memory of one block at a
  time, for about one more forward's compute.
- ``--compile``: each block's forward compiled with ``torch.compile`` (default
  backend inductor). Per block rather than the whole model: one graph compiled once
  and reused by every block of the same shape, and sharding's hooks stay outside it.

Both default to off: neither was measured on a GPU here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

log = logging.getLogger(__name__)


def blocks_of(model: nn.Module) -> list[nn.Module]:
    """The transformer's encoder blocks; for another model, its children that hold
    parameters (the CNN's convolutions and linear layers)."""
    children = list(model.children())
    layers: list[nn.Module] = [m for m in children if isinstance(m, nn.TransformerEncoderLayer)]
    if layers:
        return layers
    return [m for m in children if any(True for _ in m.parameters())]


def checkpoint_activations(block: nn.Module) -> None:
    """``block`` keeps only its inputs for the backward and recomputes the rest there."""
    forward: Callable[..., Any] = block.forward

    def recomputed(*args: Any, **kwargs: Any) -> Any:
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    block.forward = recomputed


def compile_forward(block: nn.Module, backend: str = "inductor") -> None:
    block.forward = torch.compile(block.forward, backend=backend)


def apply(
    model: nn.Module,
    *,
    activation_checkpointing: bool = False,
    compile: bool = False,
    compile_backend: str = "inductor",
) -> list[nn.Module]:
    """Apply the options to every block of ``model``; the blocks."""
    blocks = blocks_of(model)
    for block in blocks:
        if activation_checkpointing:
            checkpoint_activations(block)
        if compile:
            compile_forward(block, compile_backend)
    if activation_checkpointing or compile:
        log.info(
            "per block (%d): activation checkpointing %s, torch.compile %s",
            len(blocks),
            "on" if activation_checkpointing else "off",
            f"on ({compile_backend})" if compile else "off",
        )
    return blocks

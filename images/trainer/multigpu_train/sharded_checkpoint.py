"""A sharded model's weights and optimizer state, saved and loaded with DCP.

``torch.distributed.checkpoint`` (DCP) writes one file per rank holding only that rank's
shards, and an index (``.metadata``) of where every shard of every tensor lies. The
state comes from ``get_state_dict`` (sharded DTensors under the model's own parameter
names: the same names an unsharded model has) and goes back through
``set_state_dict``. Loading reads, on each rank, exactly the pieces of the saved shards
that its own shards cover: a checkpoint written by N ranks loads into M (an elastic job
resized), and no rank ever holds the whole model.

Every rank of the job must call both, with the same path (a volume every rank mounts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save


def _states(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    # An optimizer that has not stepped yet gets its state made (a step with zero
    # gradients and lr 0) so that there is something to load into.
    model_state, optimizer_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optimizer": optimizer_state}


def save(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    group: dist.ProcessGroup | None = None,
) -> None:
    """Write this rank's shards into ``path``; returns once every rank's shards and the
    metadata are written. ``group`` carries DCP's planning (default: the whole job)."""
    dcp_save(_states(model, optimizer), checkpoint_id=path, process_group=group)


def load(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    group: dist.ProcessGroup | None = None,
) -> None:
    """Read this rank's shards of ``path`` into ``model`` and ``optimizer``, in place."""
    state = _states(model, optimizer)
    dcp_load(state, checkpoint_id=path, process_group=group)
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optimizer"],
    )

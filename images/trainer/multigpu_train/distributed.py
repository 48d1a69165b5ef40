"""Joining and leaving the process group, with timeouts instead of silent hangs."""

from __future__ import annotations

import logging
from datetime import timedelta

import torch
import torch.distributed as dist

# The in-memory store torch.distributed uses itself; its public alias is not typed.
from torch._C._distributed_c10d import HashStore

from multigpu_train.world import World

log = logging.getLogger(__name__)


def init_process_group(world: World, backend: str, device: torch.device, timeout_s: float) -> None:
    """Join the job's process group; a world of one needs no rendezvous at all.

    ``timeout`` bounds both the rendezvous (a rank whose master never appears fails
    after it) and every later collective.
    """
    timeout = timedelta(seconds=timeout_s)
    device_id = device if device.type == "cuda" else None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not world.is_distributed:
        # An in-memory store: a single process has nobody to meet.
        dist.init_process_group(backend, store=HashStore(), rank=0, world_size=1, timeout=timeout)
        return
    log.info(
        "joining process group: backend=%s rank=%d world_size=%d master=%s:%s timeout=%ss",
        backend,
        world.rank,
        world.world_size,
        world.master_addr,
        world.master_port,
        timeout_s,
    )
    dist.init_process_group(
        backend,
        init_method="env://",
        rank=world.rank,
        world_size=world.world_size,
        timeout=timeout,
        device_id=device_id,
    )


def destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()

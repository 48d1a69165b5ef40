"""Joining and leaving the process group, with timeouts instead of silent hangs."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import NoReturn

import torch
import torch.distributed as dist

# The stores torch.distributed uses itself; their public aliases are not typed.
from torch._C._distributed_c10d import HashStore, PrefixStore, Store, TCPStore

from multigpu_train.errors import SetupError
from multigpu_train.world import World

log = logging.getLogger(__name__)


def shared_agent_store(
    world: World, timeout: timedelta, environ: Mapping[str, str]
) -> Store | None:
    """torchrun's shared rendezvous store, under a prefix unique to this round.

    With c10d rendezvous torchrun hands its workers the store it used for the
    rendezvous (TORCHELASTIC_USE_AGENT_STORE=True) and keeps it across restarts
    without clearing it. A restarted worker then found the previous round's gloo
    addresses there and failed with "Connection refused" (seen with torch 2.14). A
    prefix per restart and world size keeps each round's keys apart. The operator also
    sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, which gives every round a fresh store.
    """
    if environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    if world.master_addr is None or world.master_port is None:
        raise SetupError("torchrun shares its store but set no MASTER_ADDR/MASTER_PORT")
    client = TCPStore(
        world.master_addr, world.master_port, world.world_size, is_master=False, timeout=timeout
    )
    return PrefixStore(
        f"multigpu_train/restart{world.restart_count}-world{world.world_size}", client
    )


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
    store = shared_agent_store(world, timeout, os.environ)
    if store is not None:
        dist.init_process_group(
            backend,
            store=store,
            rank=world.rank,
            world_size=world.world_size,
            timeout=timeout,
            device_id=device_id,
        )
        return
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


def exit_after_success() -> NoReturn:
    """End a finished rank without interpreter finalization.

    A gloo rank that finished cleanly (process group destroyed, checkpoint renamed into
    place) was seen to abort now and then during finalization with "terminate called
    without an active exception" from a torch C++ thread, turning a good run into exit
    134. Nothing is left to do once training returned, so flush and leave at once.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

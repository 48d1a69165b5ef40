"""Joining and leaving the process group, with timeouts instead of silent hangs.

Two timeouts, because two kinds of waiting differ by orders of magnitude: the
rendezvous and every collective of training (``--init-timeout``: a peer that takes
that long is gone), and the wait of the other ranks while rank 0 reads or writes a
checkpoint (``--checkpoint-timeout``: a large model on a slow volume takes minutes).
The second is a barrier on a gloo group of its own, created with its own timeout, so
no NCCL collective is pending (and no NCCL watchdog counting) while rank 0 writes.

That group exists only when checkpoints are on (``--checkpoint-dir``): it is a full mesh
of TCP connections, a second transport beside NCCL that picks its interface by itself
(``GLOO_SOCKET_IFNAME`` chooses it on pods with several networks). The checkpoint's
objects travel over it too, in host memory: sent over NCCL they would be staged through
GPU memory, a whole checkpoint's worth on every rank.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

import torch
import torch.distributed as dist

# torch.distributed's documented store classes. Its stubs import them without
# re-exporting them; mypy still sees their real types through the ignore.
from torch.distributed import (  # type: ignore[attr-defined]
    HashStore,
    PrefixStore,
    Store,
    TCPStore,
)

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


@dataclass(frozen=True)
class CheckpointBarrier:
    """Where the other ranks wait while rank 0 reads or writes a checkpoint, and how
    checkpoint state travels between ranks: over ``group`` (gloo, in host memory,
    created with the checkpoint timeout). Without a group (one process, or checkpoints
    off) there is nobody to wait for and nothing to send.
    """

    group: dist.ProcessGroup | None = None
    timeout_s: float = 0.0

    def broadcast(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank."""
        if self.group is None:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's ``value``, by rank, on rank 0; None on the others."""
        if self.group is None:
            return [value]
        rank = dist.get_rank()
        gathered = [None] * dist.get_world_size(self.group) if rank == 0 else None
        dist.gather_object(value, gathered, dst=0, group=self.group)
        return gathered

    def wait(self, what: str) -> None:
        """Return once every rank, rank 0 included, is done ``what`` (reading, writing)."""
        if self.group is None:
            return
        try:
            dist.barrier(group=self.group)
        except RuntimeError as err:
            raise RuntimeError(
                f"the ranks did not meet after {what} a checkpoint within "
                f"--checkpoint-timeout {self.timeout_s:g} s (MGJ_CHECKPOINT_TIMEOUT_SECONDS); "
                f"rank 0 may still be {what} it, or a rank failed: {err}"
            ) from err


def init_process_group(
    world: World,
    backend: str,
    device: torch.device,
    timeout_s: float,
    checkpoint_timeout_s: float = 1800.0,
    checkpoints: bool = False,
) -> CheckpointBarrier:
    """Join the job's process group; a world of one needs no rendezvous at all.

    ``timeout_s`` bounds both the rendezvous (a rank whose master never appears fails
    after it) and every later collective; ``checkpoint_timeout_s`` the barrier
    returned, where ranks wait for rank 0's checkpoint reads and writes. Without
    ``checkpoints`` the barrier is empty and no gloo group is made.
    """
    timeout = timedelta(seconds=timeout_s)
    device_id = device if device.type == "cuda" else None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not world.is_distributed:
        # An in-memory store: a single process has nobody to meet.
        dist.init_process_group(backend, store=HashStore(), rank=0, world_size=1, timeout=timeout)
        return CheckpointBarrier()
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
    else:
        dist.init_process_group(
            backend,
            init_method="env://",
            rank=world.rank,
            world_size=world.world_size,
            timeout=timeout,
            device_id=device_id,
        )
    if world.world_size == 1 or not checkpoints:
        return CheckpointBarrier()
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=checkpoint_timeout_s))
    if not isinstance(group, dist.ProcessGroup):  # only for a rank left out of the group
        raise RuntimeError("this rank is not in its own checkpoint group")
    return CheckpointBarrier(group, checkpoint_timeout_s)


def global_accuracy(correct: int, total: int, device: torch.device) -> float:
    """Accuracy over every rank's counts (an all-reduce when distributed)."""
    counts = torch.tensor([correct, total], dtype=torch.float64, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(counts)
    return float(counts[0] / counts[1]) if counts[1] > 0 else float("nan")


def behind_most(count: int, device: torch.device) -> int:
    """How many fewer than the most of any rank ``count`` is (an all-reduce)."""
    most = torch.tensor([count], dtype=torch.int64, device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
    return int(most[0]) - count


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

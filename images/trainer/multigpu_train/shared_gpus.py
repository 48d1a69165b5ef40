"""One physical GPU handed to two processes of a pod: refused at start-up.

Time-slicing (the device plugin's ``replicas``) and MPS hand one physical GPU out as
several; a pod given two such "GPUs" may hold the same one twice, and so may a
``CUDA_VISIBLE_DEVICES`` that lists a GPU twice. NCCL cannot put two ranks on one GPU
("Duplicate GPU detected", at the first collective, after every rank waited for it).
The check compares GPU UUIDs: those a process sees itself (DataParallel, an in-pod
pipeline), and those the local ranks of a pod use, exchanged through files in the
pod's own temporary directory before any rank joins the process group.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import torch

from multigpu_train.errors import SetupError
from multigpu_train.world import World

ADVICE = (
    "one physical GPU is handed out twice (time-slicing or MPS sharing, or "
    "CUDA_VISIBLE_DEVICES listing it twice), and NCCL cannot run two ranks on one GPU: "
    "ask for whole GPUs (a node pool without sharing, or a MIG slice per replica), or run "
    "one process per pod (NPROC_PER_NODE=1) with gpusPerReplica: 1"
)
# How long a local rank waits for the others' UUIDs; a rank that is slower to start is
# not an error, and the check is skipped (NCCL still refuses a duplicate later).
WAIT_S = 30.0


def uuid_of(index: int) -> str:
    """The GPU's UUID; its index where this torch does not report one (nothing shared
    can then be seen)."""
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return str(uuid) if uuid is not None else f"index-{index}"


def duplicate(uuids: Mapping[int, str], what: str) -> str | None:
    """The message for the first two of ``uuids`` (by rank or index) that are equal."""
    seen: dict[str, int] = {}
    for key in sorted(uuids):
        uuid = uuids[key]
        if uuid in seen:
            return f"{what} {seen[uuid]} and {key} are the same GPU (UUID {uuid}): {ADVICE}"
        seen[uuid] = key
    return None


def check_visible(count: int) -> None:
    """The GPUs this process sees are different physical GPUs."""
    found = duplicate({i: uuid_of(i) for i in range(count)}, "cuda devices")
    if found:
        raise SetupError(found)


def exchange_directory(world: World, environ: Mapping[str, str]) -> Path:
    """A directory for this round of this job's local ranks: the same in every process
    of the pod, different after a restart."""
    job = environ.get("TORCHELASTIC_RUN_ID") or f"{world.master_addr}-{world.master_port}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job)
    return Path(tempfile.gettempdir()) / f"mgj-gpus-{safe}-{world.restart_count}"


def check_local_ranks(
    directory: Path, local_rank: int, local_world_size: int, uuid: str, wait_s: float = WAIT_S
) -> None:
    """Publish this rank's GPU UUID, read the other local ranks', refuse a duplicate."""
    directory.mkdir(parents=True, exist_ok=True)
    mine = directory / str(local_rank)
    tmp = directory / f".{local_rank}.{os.getpid()}"
    tmp.write_text(uuid)
    tmp.replace(mine)
    deadline = time.monotonic() + wait_s
    while True:
        found = {}
        for r in range(local_world_size):
            with contextlib.suppress(FileNotFoundError):
                found[r] = (directory / str(r)).read_text()
        message = duplicate(found, "local ranks")
        if message:
            raise SetupError(message)
        if len(found) == local_world_size or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def check(world: World, device: torch.device, environ: Mapping[str, str]) -> None:
    """Refuse a GPU shared by two processes of this pod, where it can be seen."""
    if device.type != "cuda":
        return
    local_world_size = int(environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    if local_world_size < 2:
        return
    uuid = uuid_of(device.index or 0)
    check_local_ranks(exchange_directory(world, environ), world.local_rank, local_world_size, uuid)

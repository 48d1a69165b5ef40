"""Who this process is: the launch contract of docs/env-contract.md, read and checked.

Two launch styles give the same variables to a worker: the operator sets RANK,
WORLD_SIZE, LOCAL_RANK and MASTER_* for a pod running one process (a plain
``python -m``), and torchrun sets them for each worker it starts (it also sets
TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT). Outside any job, a bare run is a
world of one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from multigpu_train.errors import SetupError


@dataclass(frozen=True)
class World:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str | None
    master_port: int | None
    job_name: str
    mode: str
    restart_count: int
    under_torchrun: bool

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1 or self.under_torchrun


def _int(environ: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    raw = environ.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SetupError(f"{name}={raw!r} is not an integer") from None


def _expected_processes(environ: Mapping[str, str]) -> int:
    """Processes the job should have, from the pod-level variables, when they are set."""
    pods = _int(environ, "MGJ_REPLICAS", 1) or 1
    per_pod = _int(environ, "NPROC_PER_NODE", 1) or 1
    return pods * per_pod


def read_world(environ: Mapping[str, str]) -> World:
    """The process's place in the job; a SetupError names whatever is missing."""
    under_torchrun = "TORCHELASTIC_RUN_ID" in environ
    world_size = _int(environ, "WORLD_SIZE")
    if world_size is None:
        expected = _expected_processes(environ)
        if expected > 1 or under_torchrun:
            raise SetupError(
                f"WORLD_SIZE is not set but the job runs {expected} processes "
                "(MGJ_REPLICAS x NPROC_PER_NODE): start the trainer under torchrun or "
                "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"
            )
        world_size = 1
    if world_size < 1:
        raise SetupError(f"WORLD_SIZE={world_size} must be at least 1")

    rank = _int(environ, "RANK")
    if world_size > 1:
        missing = [n for n in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not environ.get(n)]
        if missing:
            hint = ""
            if "RANK" in missing and (_int(environ, "NPROC_PER_NODE", 1) or 1) > 1:
                hint = (
                    f"; this pod runs NPROC_PER_NODE={environ['NPROC_PER_NODE']} processes, "
                    "so start it with torchrun (launcher Torchrun), which sets RANK per worker"
                )
            raise SetupError(
                f"WORLD_SIZE={world_size} but {', '.join(missing)} not set: "
                f"cannot find the other ranks{hint}"
            )
    rank = rank if rank is not None else 0
    if not 0 <= rank < world_size:
        raise SetupError(f"RANK={rank} is outside 0..{world_size - 1} (WORLD_SIZE={world_size})")

    port = _int(environ, "MASTER_PORT")
    if port is not None and not 0 < port < 65536:
        raise SetupError(f"MASTER_PORT={port} is not a TCP port")
    return World(
        rank=rank,
        world_size=world_size,
        local_rank=_int(environ, "LOCAL_RANK", 0) or 0,
        master_addr=environ.get("MASTER_ADDR") or None,
        master_port=port,
        job_name=environ.get("MGJ_JOB_NAME") or "local",
        mode=environ.get("MGJ_MODE", ""),
        restart_count=_int(environ, "TORCHELASTIC_RESTART_COUNT", 0) or 0,
        under_torchrun=under_torchrun,
    )

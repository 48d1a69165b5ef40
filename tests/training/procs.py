"""Starting trainer processes the way a pod would, and reading what they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from multigpu_operator.local.host import free_port as free_port

TESTS_DIR = Path(__file__).resolve().parent.parent
# Variables of the launch contract: a test sets exactly the ones it means to.
CONTRACT_PREFIXES = ("MGJ_", "PET_", "TORCHELASTIC_")
CONTRACT_NAMES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "NNODES",
    "NODE_RANK",
    "NPROC_PER_NODE",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in CONTRACT_NAMES and not k.startswith(CONTRACT_PREFIXES)
    }
    # Two cores on CI: one thread per process keeps ranks from starving each other.
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", MGJ_INIT_TIMEOUT_SECONDS="120")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def rank_env(
    rank: int, world: int, port: int, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What the operator gives a one-process pod (docs/env-contract.md)."""
    return clean_env(
        {
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "MGJ_JOB_NAME": "test",
            "MGJ_BACKEND": "gloo",
            "NVIDIA_VISIBLE_DEVICES": "void",
            **(extra or {}),
        }
    )


def excerpt(output: str, tail: int = 4000) -> str:
    """Error lines from anywhere (the first failing rank's may be early), then the tail."""
    errors = [line for line in output.splitlines() if "Error" in line or "error" in line]
    return "\n".join(["--- error lines:", *errors[:40], "--- tail:", output[-tail:]])


@dataclass
class Finished:
    returncode: int
    output: str

    def check(self) -> Finished:
        assert self.returncode == 0, f"exit {self.returncode}:\n{excerpt(self.output)}"
        return self

    def floats(self, pattern: str) -> list[float]:
        return [float(m) for m in re.findall(pattern, self.output)]


def start(module: str, args: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float) -> Finished:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"still running after {timeout}s:\n{out[-6000:]}") from None
    return Finished(proc.returncode, out)


def run(module: str, args: Sequence[str], env: Mapping[str, str], timeout: float = 120) -> Finished:
    return finish(start(module, args, env), timeout)


def run_ranks(
    module: str,
    args: Sequence[str],
    world: int,
    timeout: float = 180,
    per_rank: Sequence[Mapping[str, str]] | None = None,
) -> list[Finished]:
    """``world`` processes of one job, as ``world`` one-process pods would run them."""
    port = free_port()
    procs = [
        start(module, args, rank_env(r, world, port, per_rank[r] if per_rank else None))
        for r in range(world)
    ]
    deadline = time.monotonic() + timeout
    return [finish(p, max(deadline - time.monotonic(), 1)) for p in procs]

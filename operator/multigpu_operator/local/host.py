"""This machine, as a local run sees it: its GPUs and CPUs, a free port, and killing a
process with everything it started (the I/O behind local/runner.py)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from multigpu_operator.local.machine import Machine, parse_visible_devices


def this_machine(scratch_dir: str) -> Machine:
    return Machine(
        gpus=visible_gpus(os.environ),
        cpus=usable_cpus(),
        hostname=socket.gethostname(),
        python_bin_dir=os.path.dirname(sys.executable),
        environ=dict(os.environ),
        scratch_dir=scratch_dir,
    )


def usable_cpus() -> int:
    # The CPUs this process may run on (a container's cpuset), not the host's count.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def visible_gpus(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The GPUs this run may use: CUDA_VISIBLE_DEVICES when set, else every NVIDIA GPU."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        return parse_visible_devices(environ["CUDA_VISIBLE_DEVICES"])
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            listed = subprocess.run(
                [smi, "-L"], capture_output=True, text=True, timeout=30, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            listed = ""
        count = sum(line.startswith("GPU ") for line in listed.splitlines())
        if count:
            return tuple(str(i) for i in range(count))
    driver = Path("/proc/driver/nvidia/gpus")
    count = len(list(driver.iterdir())) if driver.is_dir() else 0
    return tuple(str(i) for i in range(count))


# Where the kernel picks the local ports of outgoing connections (Linux's default range).
EPHEMERAL_PORTS = "/proc/sys/net/ipv4/ip_local_port_range"
# Ports free_port picks from: below both the ephemeral range and the ports that tools
# counting down from 32767 take (kwokctl does).
LISTEN_PORTS_FROM, LISTEN_PORTS_BELOW = 10000, 30000


def free_port(count: int = 1) -> int:
    """The first of `count` consecutive ports free on 127.0.0.1 now, for processes about
    to listen on them. They lie below the kernel's ephemeral range: a port the OS picks
    (bind to port 0) comes from that range, where any outgoing connection of this machine
    may take it before the listener binds (as one did, beside a busy test cluster)."""
    try:
        first_ephemeral = int(Path(EPHEMERAL_PORTS).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768
    # Random, so that processes choosing at the same time rarely meet.
    choose = random.SystemRandom()
    last_first = max(LISTEN_PORTS_FROM, min(first_ephemeral, LISTEN_PORTS_BELOW) - count)
    for _ in range(200):
        first = choose.randint(LISTEN_PORTS_FROM, last_first)
        if all(_bindable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(
        f"no {count} free consecutive ports from {LISTEN_PORTS_FROM} to {last_first}"
    )


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def kill_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every descendant (torchrun starts its
    workers in sessions of their own, so the group alone would miss them)."""
    for target in [pid, *descendants(pid)]:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(target, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Children, grandchildren, ... of `pid`, from /proc (none where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found

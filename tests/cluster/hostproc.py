"""Daemons, mounts and cgroups of a real node on this machine: start them, find them, and
remove every trace of them (what `make cluster-down` promises).

Each daemon is started in a session of its own (it outlives the command that started
it), with its output in a log file and an environment variable naming the node, which
its children (containerd's shims) inherit. Finding processes by that variable, not by a
pid file alone, means a crashed or half-stopped node is still cleaned up completely.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from multigpu_operator.local.host import free_port as free_port

CGROUP_FS = ("cgroup", "cgroup2")


def marked_processes(marker: str, value: str) -> list[int]:
    """Pids of live processes whose environment has marker=value."""
    needle = f"{marker}={value}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(proc.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def start_daemon(
    name: str,
    argv: Sequence[str],
    log_dir: Path,
    env: dict[str, str],
) -> int:
    """Start `argv` detached from this process; its output goes to log_dir/name.log."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / f"{name}.log").open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    time.sleep(0.05)
    if proc.poll() is not None:
        raise RuntimeError(f"{name} exited at once with {proc.returncode}; see {log_dir}")
    return proc.pid


def stop(pids: Iterable[int], timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL whatever is left after `timeout` seconds."""
    pids = [p for p in pids if alive(p)]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    kill(pids)


def kill(pids: Iterable[int]) -> None:
    pids = [p for p in pids if alive(p)]
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


# Mounts ---------------------------------------------------------------------------------


def mounts_under(*roots: Path) -> list[str]:
    """Mount points at or below any of `roots`, deepest first."""
    prefixes = [str(r).rstrip("/") for r in roots]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = _unescape(line.split()[4])
        if any(target == p or target.startswith(p + "/") for p in prefixes):
            found.append(target)
    return sorted(set(found), key=lambda t: (-t.count("/"), t))


def unmount_all(*roots: Path) -> None:
    """Unmount everything mounted at or below `roots` (repeats: mounts stack)."""
    for _ in range(10):
        targets = mounts_under(*roots)
        if not targets:
            return
        for target in targets:
            subprocess.run(["umount", "-l", target], capture_output=True, check=False)
    left = mounts_under(*roots)
    if left:
        raise RuntimeError(f"could not unmount: {left}")


def _unescape(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return (
        path.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
    )


# cgroups (v1 hierarchies, and the unified one of a hybrid machine) ----------------------


def cgroup_hierarchies() -> list[Path]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] in CGROUP_FS:
            found.append(Path(_unescape(fields[4])))
    return found


def make_cgroup(name: str) -> None:
    """Create /<name> in every hierarchy; a cpuset cgroup needs cpus and mems to be used."""
    for root in cgroup_hierarchies():
        path = root / name.lstrip("/")
        path.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (path / knob).exists() and not (path / knob).read_text().strip():
                (path / knob).write_text((root / knob).read_text())


def cgroup_pids(name: str) -> list[int]:
    """Every process in /<name> or below, in any hierarchy."""
    pids: set[int] = set()
    for root in cgroup_hierarchies():
        base = root / name.lstrip("/")
        if not base.is_dir():
            continue
        for procs in base.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except OSError:
                continue
    return sorted(pids)


def remove_cgroup(name: str) -> None:
    """rmdir /<name> and everything below it, deepest first (they must be empty)."""
    for root in cgroup_hierarchies():
        base = root / name.lstrip("/")
        if not base.is_dir():
            continue
        dirs = sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for path in [*dirs, base]:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # a killed process may take a moment to leave it
            else:
                raise RuntimeError(f"cgroup {path} cannot be removed")


def cmdlines_containing(text: str) -> list[str]:
    """Command lines of the live processes whose command line contains `text`."""
    return [cmdline for _, cmdline in _containing(text)]


def pids_containing(text: str) -> list[int]:
    """Pids of the live processes whose command line contains `text`."""
    return [pid for pid, _ in _containing(text)]


def _containing(text: str) -> list[tuple[int, str]]:
    found = []
    for proc in Path("/proc").iterdir():
        # A zombie's command line is empty, so it never matches.
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append((int(proc.name), cmdline.strip()))
    return found


def run(*argv: str) -> None:
    """Run a tool to its end; its output (the last few KB) in the error if it fails."""
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )

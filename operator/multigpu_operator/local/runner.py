"""Local runs (the I/O): find out about this machine, start a job's processes, stream
their output line by line with the pod's name in front, and stop them together.

As in a cluster, one failed pod fails the job; the others are then stopped the way the
kubelet stops a container: SIGTERM, and SIGKILL to everything the process started once
the pod's grace period is over. Ctrl-C (or SIGTERM) stops every pod the same way; a
second Ctrl-C kills them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from multigpu_operator.api.spec import Job
from multigpu_operator.local.outcome import PodExit, container_exit_code, job_outcome
from multigpu_operator.local.plan import (
    LocalPlanError,
    LocalProcess,
    Machine,
    parse_visible_devices,
    plan_local,
)
from multigpu_operator.plan import DesiredState

_READ_CHUNK = 64 * 1024
# How long output may keep coming after every pod has exited.
_OUTPUT_DRAIN_S = 5.0


class RunError(RuntimeError):
    """A process could not be started; the message says which and why."""


def run_job(job: Job, desired: DesiredState, *, cpu: bool, out: TextIO, err: TextIO) -> int:
    """Run `desired.pods` here until the job Succeeds or Fails; the exit code of the run."""
    with tempfile.TemporaryDirectory(prefix=f"mgj-{job.ref.name}-") as scratch:
        try:
            plan = plan_local(job, desired, this_machine(scratch), port=free_port(), cpu=cpu)
        except LocalPlanError as error:
            print(f"error: {error}", file=err)
            return 2
        for note in plan.notes:
            print(f"note: {note}", file=err)
        for warning in plan.warnings:
            print(f"warning: {warning}", file=err)
        err.flush()
        try:
            exits = asyncio.run(run_processes(plan.processes, out, err))
        except RunError as error:
            print(f"error: {error}", file=err)
            return 2
    outcome = job_outcome(job.ref.name, len(plan.processes), exits)
    print(f"mgj: {outcome.message}", file=err)
    return outcome.exit_code


def this_machine(scratch_dir: str) -> Machine:
    return Machine(
        gpus=visible_gpus(os.environ),
        cpus=os.cpu_count() or 1,
        hostname=socket.gethostname(),
        python_bin_dir=os.path.dirname(sys.executable),
        environ=dict(os.environ),
        scratch_dir=scratch_dir,
    )


def visible_gpus(environ: dict[str, str] | os._Environ[str]) -> tuple[str, ...]:
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


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class _Running:
    spec: LocalProcess
    process: asyncio.subprocess.Process
    stopped: bool = False


async def run_processes(
    processes: Sequence[LocalProcess], out: TextIO, err: TextIO
) -> list[PodExit]:
    """Start every process and wait for all; their exits in the order they happened."""
    running: list[_Running] = []
    stopping: list[asyncio.Task[None]] = []
    interrupts = 0

    def stop_all(*, now: bool = False) -> None:
        stopping.extend(asyncio.create_task(_stop(r, now=now)) for r in running)

    def interrupt() -> None:
        nonlocal interrupts
        interrupts += 1
        print(f"mgj: stopping {'now' if interrupts > 1 else 'all pods'}", file=err, flush=True)
        stop_all(now=interrupts > 1)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupt)
    try:
        for spec in processes:
            if interrupts:
                break
            running.append(_Running(spec, await _start(spec)))
        return await _supervise(running, stop_all, out, err)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        for r in running:
            if r.process.returncode is None:
                _kill_tree(r.process.pid)
        await asyncio.gather(*stopping, return_exceptions=True)


async def _supervise(
    running: list[_Running], stop_all: Callable[[], None], out: TextIO, err: TextIO
) -> list[PodExit]:
    pumps = [
        asyncio.create_task(_pump(stream, sink, f"[{r.spec.pod}] "))
        for r in running
        for stream, sink in ((r.process.stdout, out), (r.process.stderr, err))
        if stream is not None
    ]
    waits = {asyncio.create_task(r.process.wait()): r for r in running}
    exits: list[PodExit] = []
    failed = False
    pending = set(waits)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in sorted(done, key=lambda t: waits[t].spec.index):
            finished = waits[task]
            code = container_exit_code(task.result())
            exits.append(_exit(finished, code))
            # The container is gone, and with it everything it started.
            _kill_tree(finished.process.pid)
            if code != 0 and not finished.stopped and not failed:
                # A failed rank breaks the collective: the others would wait in it forever.
                failed = True
                stop_all()
    # Output still buffered in the pipes comes through; a process that left the pod's
    # process tree must not keep the run open.
    _, late = await asyncio.wait(pumps, timeout=_OUTPUT_DRAIN_S)
    for pump in late:
        pump.cancel()
    return exits


def _program(spec: LocalProcess) -> str:
    """The command's executable, once its working and emptyDir directories are ready."""
    for directory in spec.directories:
        os.makedirs(directory, exist_ok=True)
    cwd = spec.working_dir
    if cwd is not None and not os.path.isdir(cwd):
        raise RunError(f"{spec.pod}: workingDir {cwd} does not exist on this machine")
    # Looked up on the process's own PATH (the current Python's bin directory first).
    program = shutil.which(spec.argv[0], path=spec.env.get("PATH"))
    if program is None:
        raise RunError(f"{spec.pod}: command {spec.argv[0]!r} not found on PATH")
    return program


async def _start(spec: LocalProcess) -> asyncio.subprocess.Process:
    program = _program(spec)
    try:
        return await asyncio.create_subprocess_exec(
            program,
            *spec.argv[1:],
            env=dict(spec.env),
            cwd=spec.working_dir,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # Its own process group: Ctrl-C reaches mgj alone, which then stops every pod
            # in order, and what a pod started can be killed with it.
            start_new_session=True,
        )
    except OSError as error:
        raise RunError(f"{spec.pod}: cannot start {spec.argv[0]!r}: {error}") from error


async def _stop(running: _Running, *, now: bool = False) -> None:
    """Stop like the kubelet: SIGTERM, then SIGKILL after the pod's grace period."""
    process = running.process
    if process.returncode is not None:
        return
    running.stopped = True
    if not now:
        try:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), running.spec.grace_period_s)
            return
        except ProcessLookupError:
            return
        except TimeoutError:
            pass
    _kill_tree(process.pid)
    await process.wait()


def _kill_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every descendant (torchrun starts its
    workers in sessions of their own, so the group alone would miss them)."""
    for target in [pid, *_descendants(pid)]:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(target, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
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


def _exit(running: _Running, code: int) -> PodExit:
    spec = running.spec
    return PodExit(spec.pod, spec.index, spec.container, code, time.time(), running.stopped)


async def _pump(stream: asyncio.StreamReader, sink: TextIO, prefix: str) -> None:
    """Copy `stream` to `sink` a line at a time, each line after `prefix`."""
    pending = b""
    while chunk := await stream.read(_READ_CHUNK):
        *lines, pending = (pending + chunk).split(b"\n")
        _write(sink, prefix, lines)
    if pending:
        _write(sink, prefix, [pending])


def _write(sink: TextIO, prefix: str, lines: list[bytes]) -> None:
    if not lines:
        return
    text = "".join(f"{prefix}{line.decode(errors='replace').rstrip(chr(13))}\n" for line in lines)
    try:
        sink.write(text)
        sink.flush()
    except BrokenPipeError:
        pass

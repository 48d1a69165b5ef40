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
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from multigpu_operator.api.spec import Job
from multigpu_operator.local.host import free_port, kill_tree, this_machine
from multigpu_operator.local.outcome import PodExit, container_exit_code, job_outcome
from multigpu_operator.local.plan import LocalPlanError, LocalProcess, plan_local
from multigpu_operator.plan import DesiredState

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


class _Pod(asyncio.SubprocessProtocol):
    """One running process: its output, line by line after `[pod] `, and its exit.

    A protocol rather than asyncio.subprocess.Process: Process.wait() returns only once
    the pipes close, which a process the pod started and left behind can delay forever.
    """

    def __init__(self, spec: LocalProcess, out: TextIO, err: TextIO) -> None:
        self.spec = spec
        self.exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stopped = False  # terminated by the run, not on its own
        self.transport: asyncio.SubprocessTransport | None = None
        self._sinks = {1: out, 2: err}
        self._partial = {1: b"", 2: b""}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        *lines, self._partial[fd] = (self._partial[fd] + data).split(b"\n")
        _write(self._sinks[fd], f"[{self.spec.pod}] ", lines)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if self._partial.get(fd):
            _write(self._sinks[fd], f"[{self.spec.pod}] ", [self._partial[fd]])
            self._partial[fd] = b""

    def process_exited(self) -> None:
        self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    @property
    def pid(self) -> int:
        assert self.transport is not None
        pid = self.transport.get_pid()
        return pid

    @property
    def returncode(self) -> int | None:
        return None if self.transport is None else self.transport.get_returncode()


async def run_processes(
    processes: Sequence[LocalProcess], out: TextIO, err: TextIO
) -> list[PodExit]:
    """Start every process and wait for all; their exits in the order they happened."""
    pods: list[_Pod] = []
    stopping: list[asyncio.Task[None]] = []
    interrupts = 0

    def stop_all(*, now: bool = False) -> None:
        stopping.extend(asyncio.create_task(_stop(pod, now=now)) for pod in pods)

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
            pods.append(await _start(spec, out, err))
        return await _supervise(pods, stop_all)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        for pod in pods:
            if pod.returncode is None:
                kill_tree(pod.pid)
        await asyncio.gather(*stopping, return_exceptions=True)
        for pod in pods:
            assert pod.transport is not None
            pod.transport.close()


async def _supervise(pods: list[_Pod], stop_all: Callable[[], None]) -> list[PodExit]:
    waits = {asyncio.ensure_future(pod.exited): pod for pod in pods}
    exits: list[PodExit] = []
    failed = False
    pending = set(waits)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for finished in sorted((waits[task] for task in done), key=lambda p: p.spec.index):
            returncode = finished.returncode
            assert returncode is not None
            code = container_exit_code(returncode)
            exits.append(_exit(finished, code))
            # The container is gone, and with it everything it started.
            kill_tree(finished.pid)
            if code != 0 and not finished.stopped and not failed:
                # A failed rank breaks the collective: the others would wait in it forever.
                failed = True
                stop_all()
    # Output still in the pipes comes through; a process that left the pod's process
    # tree must not keep the run open.
    await asyncio.wait([pod.closed for pod in pods], timeout=_OUTPUT_DRAIN_S)
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


async def _start(spec: LocalProcess, out: TextIO, err: TextIO) -> _Pod:
    program = _program(spec)
    loop = asyncio.get_running_loop()
    try:
        _, pod = await loop.subprocess_exec(
            lambda: _Pod(spec, out, err),
            program,
            *spec.argv[1:],
            env=dict(spec.env),
            cwd=spec.working_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # Its own process group: Ctrl-C reaches mgj alone, which then stops every pod
            # in order, and what a pod started can be killed with it.
            start_new_session=True,
        )
    except OSError as error:
        raise RunError(f"{spec.pod}: cannot start {spec.argv[0]!r}: {error}") from error
    return pod


async def _stop(pod: _Pod, *, now: bool = False) -> None:
    """Stop like the kubelet: SIGTERM, then SIGKILL after the pod's grace period."""
    if pod.returncode is not None:
        return
    pod.stopped = True
    if not now:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pod.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(pod.exited), pod.spec.grace_period_s)
            return
    kill_tree(pod.pid)
    await pod.exited


def _exit(pod: _Pod, code: int) -> PodExit:
    spec = pod.spec
    return PodExit(spec.pod, spec.index, spec.container, code, time.time(), pod.stopped)


def _write(sink: TextIO, prefix: str, lines: list[bytes]) -> None:
    if not lines:
        return
    text = "".join(f"{prefix}{line.decode(errors='replace').rstrip(chr(13))}\n" for line in lines)
    try:
        sink.write(text)
        sink.flush()
    except BrokenPipeError:
        pass

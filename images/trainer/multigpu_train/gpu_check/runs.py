"""Every training technique the devices allow, run through its real entrypoint.

Each run is a short training job on synthetic data in processes of its own (as a pod
would run it); it passes when it exits 0 having printed its test accuracy. The resume
run is killed after its first checkpoint within the epoch and started again: it must
continue from that checkpoint's position.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Variables of the launch contract: a run must not inherit those of a pod it runs in.
CONTRACT_NAMES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "NNODES", "NODE_RANK", "NPROC_PER_NODE",
)  # fmt: skip
CONTRACT_PREFIXES = ("MGJ_", "PET_", "TORCHELASTIC_")
RUN_TIMEOUT_S = 600


@dataclass(frozen=True)
class Target:
    """Where the checks run: ``count`` GPUs, or ``count`` CPU processes standing in."""

    device_type: str  # "cuda" or "cpu"
    count: int
    bf16: bool  # whether the device computes in bf16

    @property
    def env(self) -> dict[str, str]:
        if self.device_type == "cpu":
            # A thread per process: the stand-in ranks share the machine's cores.
            return {"MGJ_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
        return {}


@dataclass(frozen=True)
class Run:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    name: str
    ok: bool
    seconds: float
    detail: str  # a figure when it passed, the end of the output when not
    output: str = ""


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in CONTRACT_NAMES and not k.startswith(CONTRACT_PREFIXES)
    }
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


def python(*module_and_args: str) -> list[str]:
    return [sys.executable, "-m", *module_and_args]


def torchrun(processes: int, *module_and_args: str) -> list[str]:
    return python(
        "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", "-m",
        *module_and_args,
    )  # fmt: skip


def flags(target: Target, *extra: str) -> list[str]:
    shape = "3,32,32" if target.device_type == "cuda" else "1,16,16"
    return [
        "--dataset", "synthetic", "--synthetic-samples", "4096", "--synthetic-shape", shape,
        "--model", "transformer", "--epochs", "1", "--steps-per-epoch", "30", *extra,
    ]  # fmt: skip


def technique_runs(target: Target) -> list[Run]:
    n, env = target.count, target.env
    ddp = ("multigpu_train.ddp", *flags(target))
    runs = [
        Run("DDP under torchrun, 1 process", torchrun(1, *ddp), env),
        Run("DDP, fp16 with its gradient scaler", python(*ddp, "--precision", "fp16"), env),
        Run(
            f"DataParallel over {n} device(s)",
            python("multigpu_train.dp", *flags(target, "--batch-size", str(32 * n))),
            env,
        ),
        Run(
            f"pipeline in one process, {max(n, 2)} stages",
            python("multigpu_train.pipeline", *flags(target)),
            {**env, "MGJ_PIPELINE_STAGES": str(max(n, 2))},
        ),
    ]
    if target.bf16:
        runs.insert(1, Run("DDP, bf16", python(*ddp, "--precision", "bf16"), env))
    if n >= 2:
        # 1F1B needs at least as many micro-batches as stages, each of the same size.
        batch = str(max(64 // n, 4) * n)
        pipeline = flags(target, "--batch-size", batch, "--micro-batches", str(n))
        runs += [
            Run(f"DDP under torchrun, {n} processes", torchrun(n, *ddp), env),
            Run(
                f"pipeline across {n} ranks, 1F1B",
                torchrun(n, "multigpu_train.pipeline", *pipeline),
                {**env, "MGJ_PIPELINE_SCHEDULE": "1F1B"},
            ),
        ]
    return runs


def samples_per_second(output: str) -> str:
    rates = re.findall(r"epoch \d+/\d+ done: .*samples/s=([\d.]+)", output)
    return f"{rates[-1]} samples/s" if rates else "done"


def tail(output: str, lines: int = 15) -> str:
    return "\n".join("    " + line for line in output.strip().splitlines()[-lines:])


def run(spec: Run) -> Outcome:
    started = time.monotonic()
    try:
        done = subprocess.run(
            spec.command,
            env=child_env(spec.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        output = err.output if isinstance(err.output, str) else ""
        return Outcome(spec.name, False, RUN_TIMEOUT_S, f"timed out\n{tail(output)}")
    seconds = time.monotonic() - started
    ok = done.returncode == 0 and "final test_accuracy=" in done.stdout
    detail = (
        samples_per_second(done.stdout) if ok else f"exit {done.returncode}\n{tail(done.stdout)}"
    )
    return Outcome(spec.name, ok, seconds, detail, done.stdout)


def _until_checkpoint_then_kill(command: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Run ``command`` until it saves a checkpoint within its epoch, then SIGKILL it.

    The position saved, or None if the process ended without such a checkpoint."""
    proc = subprocess.Popen(
        command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    position = None
    for line in proc.stdout:
        found = re.search(r"checkpoint saved: .* \(epoch 0 at sample (\d+)\)", line)
        if found:
            position = found.group(1)
            proc.send_signal(signal.SIGKILL)
            break
    proc.stdout.close()
    proc.wait(timeout=RUN_TIMEOUT_S)
    return position


def resume_run(target: Target) -> Outcome:
    """DDP in fp16 with a checkpoint every 5 steps, killed after the first, restarted."""
    name = "resume mid-epoch after a kill (DDP, fp16)"
    started = time.monotonic()
    # Long enough on a GPU that the epoch is still running when the kill arrives.
    samples = "20000" if target.device_type == "cuda" else "1000"
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as directory:
        command = python(
            "multigpu_train.ddp",
            *flags(target, "--precision", "fp16", "--checkpoint-every-steps", "5"),
            "--steps-per-epoch", "0", "--synthetic-samples", samples,
            "--checkpoint-dir", str(Path(directory)),
        )  # fmt: skip
        env = child_env(target.env)
        position = _until_checkpoint_then_kill(command, env)
        if position is None:
            return Outcome(name, False, time.monotonic() - started, "no checkpoint in the epoch")
        again = run(Run(name, command, target.env))
    seconds = time.monotonic() - started
    if not again.ok:
        return Outcome(name, False, seconds, again.detail)
    if f"resumed from epoch 0 at sample {position} " not in again.output:
        return Outcome(
            name, False, seconds, f"not resumed at sample {position}\n{tail(again.output)}"
        )
    return Outcome(name, True, seconds, f"killed after sample {position}, resumed there")

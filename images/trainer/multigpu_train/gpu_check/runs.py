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

import multigpu_train

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
    # Give it a fresh --checkpoint-dir: checkpoints on, as a job with a volume has them.
    checkpoints: bool = False


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
    # The package as this process found it (a source tree on a relative PYTHONPATH too).
    source = str(Path(multigpu_train.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
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
    half = "bf16" if target.bf16 else "fp16"
    # Every stage needs a layer with parameters: 4 blocks give 8 such layers.
    layers = ("--transformer-layers", str(max(4, n)))
    runs = [
        Run("DDP under torchrun, 1 process", torchrun(1, *ddp), env),
        Run("DDP, fp16 with its gradient scaler", python(*ddp, "--precision", "fp16"), env),
        Run(
            "DDP, 2 data-loader workers, pinned memory",
            python(*ddp, "--data-workers", "2"),
            env,
        ),
        Run(
            f"DataParallel over {n} device(s)",
            python("multigpu_train.dp", *flags(target, "--batch-size", str(32 * n))),
            env,
        ),
        Run(
            f"DataParallel over {n} device(s), {half} autocast",
            python(
                "multigpu_train.dp",
                *flags(target, "--batch-size", str(32 * n), "--precision", half),
            ),
            env,
        ),
        Run(
            f"pipeline in one process, {max(n, 2)} stages",
            python("multigpu_train.pipeline", *flags(target, *layers)),
            {**env, "MGJ_PIPELINE_STAGES": str(max(n, 2))},
        ),
    ]
    if target.bf16:
        runs.insert(1, Run("DDP, bf16", python(*ddp, "--precision", "bf16"), env))
    # Sharded (FSDP2): bf16 through its mixed-precision policy (fp16 is refused there).
    sharded_precision = ("--precision", "bf16" if target.bf16 else "fp32")
    sharded = (*ddp, "--sharding", "full", *sharded_precision)
    runs += [
        Run(f"FSDP2 under torchrun, {n} process(es)", torchrun(n, *sharded), env),
        Run(
            "FSDP2, activation checkpointing and torch.compile per block",
            torchrun(n, *sharded, "--activation-checkpointing", "true", "--compile", "true"),
            env,
        ),
    ]
    if n >= 2:
        # 1F1B needs at least as many micro-batches as stages, each of the same size.
        batch = str(max(64 // n, 4) * n)
        pipeline = flags(target, "--batch-size", batch, "--micro-batches", str(n), *layers)
        runs += [
            Run(f"DDP under torchrun, {n} processes", torchrun(n, *ddp), env),
            # One pod of n processes: a (1, n) mesh, the 2-D mesh's code path.
            Run(
                f"FSDP2 hybrid under torchrun, {n} processes",
                torchrun(n, *ddp, "--sharding", "hybrid", *sharded_precision),
                env,
            ),
            Run(
                f"pipeline across {n} ranks, 1F1B",
                torchrun(n, "multigpu_train.pipeline", *pipeline),
                {**env, "MGJ_PIPELINE_SCHEDULE": "1F1B"},
            ),
            # The stages' shared fp16 scaler and the checkpoint barrier beside NCCL.
            Run(
                f"pipeline across {n} ranks, fp16, checkpoints on",
                torchrun(
                    n,
                    "multigpu_train.pipeline",
                    *pipeline,
                    "--precision",
                    "fp16",
                    "--checkpoint-every-steps",
                    "10",
                ),
                env,
                checkpoints=True,
            ),
        ]
    return runs


def samples_per_second(output: str) -> str:
    rates = re.findall(r"epoch \d+/\d+ done: .*samples/s=([\d.]+)", output)
    return f"{rates[-1]} samples/s" if rates else "done"


def tail(output: str, lines: int = 15) -> str:
    return "\n".join("    " + line for line in output.strip().splitlines()[-lines:])


def run(spec: Run) -> Outcome:
    if spec.checkpoints:
        with tempfile.TemporaryDirectory(prefix="gpu-check-") as directory:
            command = [*spec.command, "--checkpoint-dir", directory]
            return run(Run(spec.name, command, spec.env))
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


# Runs besides technique_runs, in the order main() makes them.
EXTRA_RUNS = (
    "resume mid-epoch after a kill (DDP, fp16)",
    "elastic restart: a worker killed, torchrun restarts it",
    "DCP save, resume and reshard (FSDP2)",
)


def elastic_run(target: Target) -> Outcome:
    """torchrun with a restart to spare; a worker is killed after the first checkpoint
    within the epoch, and the restarted group must resume from it."""
    name = EXTRA_RUNS[1]
    started = time.monotonic()
    samples = "20000" if target.device_type == "cuda" else "1000"
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as directory:
        command = [
            *python("torch.distributed.run"), "--standalone", "--nproc-per-node=1",
            "--max-restarts=1", "--monitor-interval=0.2", "-m", "multigpu_train.ddp",
            *flags(target, "--checkpoint-every-steps", "5"),
            "--steps-per-epoch", "0", "--synthetic-samples", samples,
            "--checkpoint-dir", directory,
        ]  # fmt: skip
        output = _kill_worker_after_checkpoint(command, child_env(target.env))
    seconds = time.monotonic() - started
    if output is None:
        return Outcome(name, False, seconds, f"timed out after {RUN_TIMEOUT_S} s")
    code, text = output
    resumed = re.search(r"resumed from epoch 0 at sample (\d+)", text)
    if code != 0 or "final test_accuracy=" not in text or resumed is None:
        return Outcome(name, False, seconds, f"exit {code}, not resumed\n{tail(text)}", text)
    return Outcome(name, True, seconds, f"restarted, resumed at sample {resumed.group(1)}", text)


def _kill_worker_after_checkpoint(
    command: Sequence[str], env: Mapping[str, str]
) -> tuple[int, str] | None:
    """Run torchrun; SIGKILL its worker (by the pid in its log lines) once it saved a
    checkpoint within its first round. The exit status and output, None on a timeout."""
    proc = subprocess.Popen(
        command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines: list[str] = []
    killed = False
    deadline = time.monotonic() + RUN_TIMEOUT_S
    for line in proc.stdout:
        lines.append(line)
        if not killed and re.search(r"checkpoint saved: .* \(epoch 0 at sample \d+\)", line):
            worker = re.search(r"rank=0 pid=(\d+) .*restart=0", "".join(lines))
            if worker is not None:
                os.kill(int(worker.group(1)), signal.SIGKILL)
                killed = True
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            return None
    proc.wait()
    return proc.returncode, "".join(lines)

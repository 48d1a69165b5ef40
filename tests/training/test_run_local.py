"""`mgj run FILE --local` with real processes: logs, exit codes, stopping, training.

Each test runs the `mgj` command as a user would (a subprocess, so signals are real)
on small jobs whose containers run Python from this environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120


def script_job(
    name: str, code: str, *, replicas: int = 2, gpus: int = 0, **pod_spec: Any
) -> dict[str, Any]:
    """A job whose trainer runs `code` with `python -c`, one process per pod (launcher
    Script); with several GPUs a pod runs one process per GPU, which needs a launcher
    (Torchrun: the same variables; `code` only reads them)."""
    return {
        "apiVersion": "multigpu.dev/v1alpha1",
        "kind": "MultiGPUJob",
        "metadata": {"name": name},
        "spec": {
            "mode": "DistributedDataParallel",
            "replicas": replicas,
            "gpusPerReplica": gpus,
            "launcher": "Script" if gpus <= 1 else "Torchrun",
            "template": {
                "spec": {
                    **pod_spec,
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "python:3.11",
                            "command": ["python", "-c", textwrap.dedent(code)],
                        }
                    ],
                }
            },
        },
    }


def write_job(tmp_path: Path, job: dict[str, Any]) -> Path:
    path = tmp_path / f"{job['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def mgj(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "multigpu_operator.cli", *args]


def run(
    job: Path, *flags: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        mgj(["run", str(job), *flags]),
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def alive(pid: int) -> bool:
    """Whether `pid` still runs; a zombie (killed, not yet reaped by init) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_files(*paths: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"not written in {timeout}s: {paths}"
        time.sleep(0.05)


# Rank 0 writes its pid and waits "forever"; rank 1 fails once rank 0 is up.
FAIL_ONE = """
    import os, pathlib, sys, time
    rank = int(os.environ["RANK"])
    state = pathlib.Path(sys.argv[1])
    print(f"hello from rank {rank} of {os.environ['WORLD_SIZE']}")
    print(f"a warning from rank {rank}", file=sys.stderr)
    if rank == 0:
        (state / "pid-0").write_text(str(os.getpid()))
        time.sleep(300)
    while not (state / "pid-0").exists():
        time.sleep(0.05)
    sys.exit(3)
"""


def with_args(job: dict[str, Any], *args: str) -> dict[str, Any]:
    job["spec"]["template"]["spec"]["containers"][0]["args"] = list(args)
    return job


def test_lines_carry_the_pod_name_and_a_failed_pod_fails_the_job_and_stops_the_others(
    tmp_path: Path,
) -> None:
    job = write_job(tmp_path, with_args(script_job("fail", FAIL_ONE), str(tmp_path)))
    started = time.monotonic()
    result = run(job, "--local")
    assert result.returncode == 3, result.stderr
    assert time.monotonic() - started < 60  # rank 0 was stopped, not waited for
    assert "[fail-0] hello from rank 0 of 2" in result.stdout.splitlines()
    assert "[fail-1] hello from rank 1 of 2" in result.stdout.splitlines()
    assert "[fail-1] a warning from rank 1" in result.stderr.splitlines()
    assert "mgj: job fail Failed: pod fail-1 (replica 1) failed with exit code 3: Error" in (
        result.stderr
    )
    assert not alive(int((tmp_path / "pid-0").read_text()))


# Rank 0 ignores SIGTERM and starts a process in a session of its own (as torchrun
# starts its workers); rank 1 fails.
STUBBORN = """
    import os, pathlib, signal, subprocess, sys, time
    rank = int(os.environ["RANK"])
    state = pathlib.Path(sys.argv[1])
    if rank == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        worker = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
        )
        (state / "pids").write_text(f"{os.getpid()} {worker.pid}")
        time.sleep(300)
    while not (state / "pids").exists():
        time.sleep(0.05)
    sys.exit(1)
"""


def test_a_pod_ignoring_sigterm_is_killed_after_its_grace_period_with_its_workers(
    tmp_path: Path,
) -> None:
    job = script_job("stubborn", STUBBORN, terminationGracePeriodSeconds=1)
    started = time.monotonic()
    result = run(write_job(tmp_path, with_args(job, str(tmp_path))), "--local")
    assert result.returncode == 1, result.stderr
    assert 1 <= time.monotonic() - started < 60
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert [alive(p) for p in pids] == [False, False]


def test_a_job_succeeds_when_every_pod_exits_0(tmp_path: Path) -> None:
    code = """
        import os
        print(os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["MASTER_ADDR"])
    """
    result = run(write_job(tmp_path, script_job("ok", code, replicas=3)), "--local")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == [f"[ok-{i}] {i} 3 127.0.0.1" for i in range(3)]
    assert "mgj: job ok Succeeded: all 3 pods exited 0" in result.stderr


def test_ctrl_c_stops_every_pod(tmp_path: Path) -> None:
    code = """
        import os, pathlib, sys, time
        pathlib.Path(sys.argv[1], "pid-" + os.environ["RANK"]).write_text(str(os.getpid()))
        time.sleep(300)
    """
    job = write_job(tmp_path, with_args(script_job("sleepy", code), str(tmp_path)))
    with subprocess.Popen(
        mgj(["run", str(job), "--local"]), cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    ) as mgj_process:  # fmt: skip
        pid_files = [tmp_path / "pid-0", tmp_path / "pid-1"]
        wait_for_files(*pid_files)
        mgj_process.send_signal(signal.SIGINT)
        _, stderr = mgj_process.communicate(timeout=60)
    assert mgj_process.returncode == 130, stderr
    assert "mgj: job sleepy interrupted" in stderr
    assert [alive(int(p.read_text())) for p in pid_files] == [False, False]


GPU_ENV = """
    import os
    print(os.environ["CUDA_VISIBLE_DEVICES"] or "none", os.environ["MGJ_BACKEND"],
          os.environ["WORLD_SIZE"], os.environ["NPROC_PER_NODE"])
"""


def test_each_pod_gets_its_own_gpus(tmp_path: Path) -> None:
    # The processes only print what they were given: no GPU is needed to check the split.
    job = write_job(tmp_path, script_job("gpus", GPU_ENV, gpus=2))
    result = run(job, "--local", env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["[gpus-0] 4,5 nccl 4 2", "[gpus-1] 6,7 nccl 4 2"]


def test_a_gpu_job_needs_gpus_or_cpu(tmp_path: Path) -> None:
    job = write_job(tmp_path, script_job("gpus", GPU_ENV, gpus=2))
    refused = run(job, "--local", env={"CUDA_VISIBLE_DEVICES": ""})
    assert refused.returncode == 2
    assert "needs 4 GPUs (2 pods x 2 spec.gpusPerReplica) and this machine has none" in (
        refused.stderr
    )
    assert "add --cpu" in refused.stderr
    on_cpu = run(job, "--local", "--cpu", env={"CUDA_VISIBLE_DEVICES": ""})
    assert on_cpu.returncode == 0, on_cpu.stderr
    # WORLD_SIZE and processes per pod stay as planned; the backend becomes gloo.
    assert sorted(on_cpu.stdout.splitlines()) == [
        "[gpus-0] none gloo 4 2",
        "[gpus-1] none gloo 4 2",
    ]


def test_run_without_local_is_refused(tmp_path: Path) -> None:
    result = run(write_job(tmp_path, script_job("ok", "pass")))
    assert result.returncode == 2
    assert "mgj run needs --local for now" in result.stderr


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"command": ["no-such-trainer"]}, "command 'no-such-trainer' not found on PATH"),
        ({"workingDir": "/no/such/dir"}, "workingDir /no/such/dir does not exist"),
    ],
)
def test_a_pod_that_cannot_start_is_an_error(
    tmp_path: Path, container: dict[str, Any], message: str
) -> None:
    job = script_job("broken", "pass")
    job["spec"]["template"]["spec"]["containers"][0].update(container)
    result = run(write_job(tmp_path, job), "--local")
    assert result.returncode == 2
    assert f"error: broken-0: {message}" in result.stderr


def test_the_tutorial_script_trains_unchanged_on_two_cpu_processes(tmp_path: Path) -> None:
    job = yaml.safe_load((REPO / "examples/tutorial-script.yaml").read_text())
    checkpoint = tmp_path / "checkpoint.pt"
    with_args(job, "--epochs", "3", "--checkpoint", str(checkpoint))
    result = run(write_job(tmp_path, job), "--local")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    done = [line.split("weight norm ")[1] for line in lines if "| world size 2 |" in line]
    assert len(done) == 2
    assert done[0] == done[1]  # DDP kept both replicas identical
    rank0 = [line for line in lines if line.startswith("[tutorial-script-0] [rank 0] epoch")]
    losses = [float(line.rsplit("loss ", 1)[1]) for line in rank0 if "loss" in line]
    assert losses[-1] < losses[0] / 4
    accuracy = [line for line in lines if line.startswith("[tutorial-script-0] [rank 0] test")]
    assert len(accuracy) == 1
    assert float(accuracy[0].rsplit(" ", 1)[1]) > 0.8
    assert "[tutorial-script-0] [rank 0] epoch 2 | checkpoint saved at" in result.stdout
    import torch  # only this test needs it

    state = torch.load(checkpoint)
    assert state["epoch"] == 3
    assert set(state["model"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}


def processes(example: Path) -> int:
    spec = yaml.safe_load(example.read_text())["spec"]
    return int(spec.get("replicas", 1)) * max(int(spec.get("gpusPerReplica", 1)), 1)


# Examples that fit a small CPU machine (2 cores in CI): at most 4 training processes,
# each GPU becoming one CPU process. kueue.yaml (2 pods x 4 GPUs) is ddp.yaml's job plus
# queueing settings that a local run does not use.
MAX_PROCESSES = 4
# The framework examples' image adds Lightning and Accelerate, which this machine's venv
# does not hold: tests/integration/test_frameworks.py runs them on real pods instead.
FRAMEWORKS_IMAGE = "/trainer-frameworks:"


def in_this_venv(example: Path) -> bool:
    return FRAMEWORKS_IMAGE not in example.read_text()


CPU_SIZED = [
    p
    for p in sorted((REPO / "examples").glob("*.yaml"))
    if processes(p) <= MAX_PROCESSES and in_this_venv(p)
]
# Fewer epochs and steps keep the examples' own setup while the test stays short; the
# training package reads these (docs/training.md), and a pod's own env would still win.
SHORT = {"MGJ_EPOCHS": "1", "MGJ_STEPS_PER_EPOCH": "10"}


def test_every_cpu_sized_example_is_selected() -> None:
    assert {p.stem for p in CPU_SIZED} >= {
        "cpu-ddp",
        "data-parallel",
        "ddp",
        "ddp-script",
        "elastic",
        "model-parallel",
        "tutorial-script",
    }


@pytest.mark.parametrize("example", CPU_SIZED, ids=[p.stem for p in CPU_SIZED])
def test_example_completes_on_this_cpu(example: Path) -> None:
    job = yaml.safe_load(example.read_text())
    name, spec = job["metadata"]["name"], job["spec"]
    cpu = ["--cpu"] if int(spec.get("gpusPerReplica", 1)) > 0 else []
    result = run(example, "--local", *cpu, env={**SHORT, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert result.returncode == 0, result.stderr[-6000:]
    pods = int(spec.get("replicas", 1))
    assert f"mgj: job {name} Succeeded: all {pods} pods exited 0" in result.stderr
    output = result.stdout + result.stderr
    assert all(f"[{name}-{i}] " in output for i in range(pods))

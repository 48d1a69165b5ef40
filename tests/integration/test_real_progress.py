"""Progress, a lost pod and a hung rank, on the real node (tests/cluster/realnode.py) with
our trainer image, planned by this checkout's operator (a process on this machine, which
reads the pods' metrics endpoints at their IPs, as the in-cluster operator does).

One job lives through both faults, in order: a pod deleted mid-run (a lost node's stand-in)
starts a new attempt that resumes from the last checkpoint on the job's claim, and the
status's progress goes on from there; then one rank is frozen (SIGSTOP) while the other
waits for it in an all-reduce, which the stall watchdog names and ends with a new attempt
from the checkpoint, and the job succeeds.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.localcluster import LocalCluster
from support.jobs import JobEnv, condition
from support.operator_process import OperatorProcess
from support.real_pods import bind_local_volume, on_real_node, pod_log, unpushed_images
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/storage/cpu-ddp-checkpoint-pvc.yaml"
NAME = "progress"
STALL_DEADLINE = 30
# About 0.6 s an epoch on an idle machine (the digits data, 2 ranks): long enough to lose a
# pod, resume and freeze a rank before the end; a checkpoint every few seconds.
EPOCHS, CHECKPOINT_EVERY = 150, 200


@pytest.fixture
def real(
    installed_crd: LocalCluster,
    api_client: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
) -> JobEnv:
    missing = unpushed_images(installed_crd)
    assert not missing, f"{missing} not in the local registry: run `make images` first"
    return JobEnv(installed_crd, api_client, core, namespace)


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    """examples/storage/cpu-ddp-checkpoint-pvc.yaml: its claim and its job."""
    claim, job = yaml.safe_load_all(EXAMPLE.read_text())
    return claim, job


@pytest.fixture
def checkpoints(real: JobEnv) -> Iterator[Path]:
    """The example's claim, bound to a directory on the real node's disk (root's, as a
    fresh volume is); the directory."""
    claim, _ = example()
    directory = real.cluster.node_layout.cache / "volumes" / real.namespace
    directory.mkdir(parents=True, mode=0o755)
    volume = bind_local_volume(real.cluster, real.namespace, claim, directory)
    yield directory
    real.cluster.kubectl("delete", "mgj", "-n", real.namespace, NAME, "--wait=true")
    real.cluster.kubectl(
        "delete", "pvc", "-n", real.namespace, claim["metadata"]["name"], "--wait=false"
    )
    real.cluster.kubectl("delete", "pv", volume, "--wait=false")
    shutil.rmtree(directory)


def job() -> dict[str, Any]:
    """The example's job, longer, checkpointing every CHECKPOINT_EVERY steps, with a stall
    deadline."""
    _, manifest = example()
    manifest["metadata"]["name"] = NAME
    manifest["spec"]["runPolicy"] = {
        "backoffLimit": 3,
        "stall": {"deadlineSeconds": STALL_DEADLINE, "action": "Restart"},
    }
    trainer = manifest["spec"]["template"]["spec"]["containers"][0]
    trainer["args"] = [
        "--epochs", str(EPOCHS), "--checkpoint-every-steps", str(CHECKPOINT_EVERY),
    ]  # fmt: skip
    return on_real_node(manifest)


def progress(real: JobEnv) -> dict[str, Any]:
    return dict(real.status(NAME).get("progress") or {})


def worker_pid(namespace: str, rank: int) -> int:
    """The host PID of training process `rank` of the job (a torchrun worker, not its
    agent: torchrun gives its workers TORCHELASTIC_RESTART_COUNT)."""
    wanted = {b"MGJ_JOB_NAME=" + NAME.encode(), b"MGJ_JOB_NAMESPACE=" + namespace.encode()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if (
            wanted <= env
            and f"RANK={rank}".encode() in env
            and any(v.startswith(b"TORCHELASTIC_RESTART_COUNT=") for v in env)
        ):
            return int(entry.name)
    raise AssertionError(f"no training process of rank {rank} of {namespace}/{NAME}")


def test_a_lost_pod_resumes_from_the_checkpoint_and_a_frozen_rank_is_named_and_restarted(
    real: JobEnv, checkpoints: Path
) -> None:
    real.apply(job())
    # Progress shows in the status while the job runs (the operator reads rank 0).
    first = wait_for(
        lambda: (p := progress(real)).get("step", 0) > CHECKPOINT_EVERY and p,
        "progress past the first checkpoint",
        timeout=240,
        interval=1,
    )
    total = first["totalSteps"]
    assert first["summary"] == f"{first['step'] * 100 // total}%"
    wait_for(lambda: (checkpoints / "checkpoint.pt").exists(), "a checkpoint on disk")

    # A pod lost mid-run: a new attempt, which resumes where the checkpoint was.
    real.cluster.kubectl("delete", "pod", "-n", real.namespace, f"{NAME}-1", "--wait=false")
    lost_at = time.monotonic()
    resumed = wait_for(
        lambda: (
            real.status(NAME).get("attempt", 1) >= 2
            and (p := progress(real)).get("resumedStep")
            and p
        ),
        "the second attempt's progress, resumed",
        timeout=240,
        interval=1,
    )
    # Seen at the first read that shows it: up to a round (15 s) after the ranks resumed.
    shown = time.monotonic() - lost_at
    print(f"pod deleted -> the new attempt's resumed progress shown: {shown:.1f} s")
    assert resumed["resumedStep"] >= CHECKPOINT_EVERY
    assert resumed["step"] >= resumed["resumedStep"]
    moved = wait_for(
        lambda: (p := progress(real)).get("step", 0) > resumed["step"] and p,
        "progress moving on after the resume",
        timeout=120,
        interval=1,
    )
    assert moved["resumedStep"] == resumed["resumedStep"]

    # Rank 1 frozen: rank 0 waits for it in an all-reduce, and the step stands still.
    attempt = real.status(NAME)["attempt"]
    pid = worker_pid(real.namespace, 1)
    os.kill(pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        stalled = wait_for(
            lambda: (c := condition(real.status(NAME), "Stalled")) and c["status"] == "True" and c,
            "the Stalled condition",
            timeout=STALL_DEADLINE + 90,
            interval=1,
        )
        detected = time.monotonic() - frozen_at
    finally:
        os.kill(pid, signal.SIGCONT)  # whatever happened, let the kubelet end it
    print(f"rank frozen -> Stalled: {detected:.1f} s (deadline {STALL_DEADLINE} s)")
    assert detected <= STALL_DEADLINE + 30, detected
    assert "rank 1" in stalled["message"], stalled
    assert f"{NAME}-1" in stalled["message"], stalled

    def finished() -> dict[str, Any] | None:
        status = real.status(NAME)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = wait_for(finished, f"{NAME} finished", timeout=600, interval=1)
    log = pod_log(real.cluster, real.namespace, f"{NAME}-0")
    assert status["phase"] == "Succeeded", (status, log[-3000:])
    assert status["attempt"] == attempt + 1
    # The last progress read stays in the status (read at most a round before the end).
    assert status["progress"]["resumedStep"] >= CHECKPOINT_EVERY
    assert moved["step"] < status["progress"]["step"] <= total

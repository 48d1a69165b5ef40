"""Progress, a lost pod and a hung rank, on the real node (tests/cluster/realnode.py) with
our trainer image, planned by this checkout's operator (a process on this machine, which
reads the pods' metrics endpoints at their IPs, as the in-cluster operator does).

One job lives through both faults, in order: a pod deleted mid-run (a lost node's stand-in)
starts a new attempt that resumes from the last checkpoint on the node's disk, and the
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

from cluster.images import TRAINER_IMAGE
from cluster.localcluster import LocalCluster
from support.jobs import JobEnv, condition
from support.operator_process import OperatorProcess
from support.real_pods import on_real_node, pod_log
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
NAME = "progress"
IMAGE_UID = 10001
STALL_DEADLINE = 30
STEPS, CHECKPOINT_EVERY = 600, 50


@pytest.fixture
def real(
    installed_crd: LocalCluster,
    api_client: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
) -> JobEnv:
    assert TRAINER_IMAGE in installed_crd.real_node.image_labels(), (
        f"{TRAINER_IMAGE} not on the real node: run `make images` first"
    )
    return JobEnv(installed_crd, api_client, core, namespace)


@pytest.fixture
def checkpoints(real: JobEnv) -> Iterator[Path]:
    """A directory on the real node's disk that outlives the pods, the image's user's."""
    directory = real.cluster.node_layout.cache / "volumes" / real.namespace
    directory.mkdir(parents=True)
    os.chown(directory, IMAGE_UID, IMAGE_UID)
    yield directory
    shutil.rmtree(directory)


def job(checkpoints: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load((REPO / "examples/cpu-ddp.yaml").read_text())
    manifest["metadata"]["name"] = NAME
    manifest["spec"]["runPolicy"] = {
        "backoffLimit": 3,
        "stall": {"deadlineSeconds": STALL_DEADLINE, "action": "Restart"},
    }
    pod = manifest["spec"]["template"]["spec"]
    trainer = pod["containers"][0]
    trainer["args"] = [
        "--epochs", "1", "--steps-per-epoch", str(STEPS), "--batch-size", "64",
        "--checkpoint-every-steps", str(CHECKPOINT_EVERY), "--checkpoint-dir", "/checkpoints",
    ]  # fmt: skip
    trainer["volumeMounts"] = [{"name": "checkpoints", "mountPath": "/checkpoints"}]
    pod["volumes"] = [
        {"name": "checkpoints", "hostPath": {"path": str(checkpoints), "type": "Directory"}}
    ]
    placed = on_real_node(manifest)
    # hostPath is not "restricted"; this namespace does not enforce it.
    placed["spec"]["template"]["spec"]["containers"][0]["securityContext"].pop(
        "seccompProfile", None
    )
    return placed


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
        if wanted <= env and f"RANK={rank}".encode() in env and any(
            v.startswith(b"TORCHELASTIC_RESTART_COUNT=") for v in env
        ):
            return int(entry.name)
    raise AssertionError(f"no training process of rank {rank} of {namespace}/{NAME}")


def test_a_lost_pod_resumes_from_the_checkpoint_and_a_frozen_rank_is_named_and_restarted(
    real: JobEnv, checkpoints: Path
) -> None:
    real.apply(job(checkpoints))
    # Progress shows in the status while the job runs (the operator reads rank 0).
    first = wait_for(
        lambda: (p := progress(real)).get("step", 0) > CHECKPOINT_EVERY and p,
        "progress past the first checkpoint",
        timeout=240,
        interval=1,
    )
    assert first["totalSteps"] == STEPS
    assert first["summary"].endswith("%")
    wait_for(lambda: (checkpoints / "checkpoint.pt").exists(), "a checkpoint on disk")

    # A pod lost mid-run: a new attempt, which resumes where the checkpoint was.
    real.cluster.kubectl("delete", "pod", "-n", real.namespace, f"{NAME}-1", "--wait=false")
    resumed = wait_for(
        lambda: real.status(NAME).get("attempt", 1) >= 2
        and (p := progress(real)).get("resumedStep")
        and p,
        "the second attempt's progress, resumed",
        timeout=240,
        interval=1,
    )
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
    assert detected <= STALL_DEADLINE + 30, detected
    assert "rank 1" in stalled["message"], stalled
    assert f"{NAME}-1" in stalled["message"], stalled

    def finished() -> dict[str, Any] | None:
        status = real.status(NAME)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = wait_for(finished, f"{NAME} finished", timeout=420, interval=1)
    log = pod_log(real.cluster, real.namespace, f"{NAME}-0")
    assert status["phase"] == "Succeeded", (status, log[-3000:])
    assert status["attempt"] == attempt + 1
    assert status["progress"]["resumedStep"] >= CHECKPOINT_EVERY
    assert status["progress"]["step"] == STEPS

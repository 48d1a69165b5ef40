"""Checkpoints on a PersistentVolumeClaim, on the real node (tests/cluster/realnode.py):
examples/storage/cpu-ddp-checkpoint-pvc.yaml as written (non-root, read-only root
filesystem) in a namespace that enforces Pod Security "restricted", planned by this
checkout's operator (a process, as in test_operator_e2e.py; the operator image on the node
may be older than the checkout).

The local cluster has no storage provisioner. The test stands in for one with a local
PersistentVolume on the real node, bound to the example's claim, in a directory it makes
owned by root, as a fresh volume is: only the fsGroup the operator adds lets the image's
uid 10001 write there, and only the /tmp it adds lets torchrun start.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cluster.localcluster import LocalCluster
from support.jobs import JobEnv
from support.operator_process import OperatorProcess
from support.real_pods import bind_local_volume, on_real_node, pod_log, unpushed_images
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/storage/cpu-ddp-checkpoint-pvc.yaml"
IMAGE_UID = 10001


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    """The example's claim and job."""
    claim, job = yaml.safe_load_all(EXAMPLE.read_text())
    return claim, job


@pytest.fixture
def real(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    operator: OperatorProcess,
) -> JobEnv:
    """This test's namespace, enforcing "restricted", watched by the operator."""
    missing = unpushed_images(installed_crd)
    assert not missing, f"{missing} not in the local registry: run `make images` first"
    installed_crd.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )
    return JobEnv(installed_crd, api_client, core, namespace)


@pytest.fixture
def checkpoint_volume(real: JobEnv) -> Iterator[Path]:
    """The example's claim, bound to a local volume on the real node; its directory."""
    claim, _ = example()
    directory = real.cluster.node_layout.cache / "volumes" / real.namespace
    directory.mkdir(parents=True, mode=0o755)  # root's, as a freshly provisioned volume
    volume = bind_local_volume(real.cluster, real.namespace, claim, directory)
    yield directory
    real.cluster.kubectl(
        "delete", "pvc", "-n", real.namespace, claim["metadata"]["name"], "--wait=false"
    )
    real.cluster.kubectl("delete", "pv", volume, "--wait=false")
    shutil.rmtree(directory)


def run_job(real: JobEnv, name: str, *args: str) -> dict[str, Any]:
    """The example's job as `name` with container `args`, on the real node; its final status."""
    _, job = example()
    job["metadata"]["name"] = name
    job["spec"]["template"]["spec"]["containers"][0]["args"] = list(args)
    real.apply(on_real_node(job))

    def done() -> dict[str, Any] | None:
        status = real.status(name)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    return wait_for(done, f"{name} finished", timeout=300, interval=1)


def test_a_non_root_read_only_job_keeps_its_checkpoints_on_a_claim(
    real: JobEnv, checkpoint_volume: Path
) -> None:
    first = run_job(real, "first", "--epochs", "1", "--steps-per-epoch", "20")
    logs = {i: pod_log(real.cluster, real.namespace, f"first-{i}") for i in (0, 1)}
    assert first["phase"] == "Succeeded", (first, logs[0][-3000:])
    pod = real.core.read_namespaced_pod("first-0", real.namespace).spec
    assert pod.containers[0].security_context.read_only_root_filesystem is True
    assert "/tmp" in [m.mount_path for m in pod.containers[0].volume_mounts]
    # Written by the image's user into the root-owned volume, through the pod's fsGroup.
    written = checkpoint_volume / "checkpoint.pt"
    assert (written.stat().st_uid, written.stat().st_gid) == (IMAGE_UID, IMAGE_UID)
    assert checkpoint_volume.stat().st_gid == IMAGE_UID

    # A new job on the same claim (as after the job is deleted and created again) resumes.
    second = run_job(real, "second", "--epochs", "2", "--steps-per-epoch", "20")
    log = pod_log(real.cluster, real.namespace, "second-0")
    assert second["phase"] == "Succeeded", (second, log[-3000:])
    assert re.search(r"\bresumed from epoch 1\b", log), log[-3000:]  # not 10
    for name in ("first", "second"):
        real.cluster.kubectl("delete", "mgj", "-n", real.namespace, name, "--wait=true")

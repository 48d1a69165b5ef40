"""Scripts written for Lightning and for Hugging Face Accelerate, unchanged, on real pods.

examples/lightning-ddp.yaml and examples/accelerate-ddp.yaml, each with both launchers
the operator offers (`Script`: one `python script.py` per pod with RANK, WORLD_SIZE,
MASTER_* set; `Torchrun`: `torchrun script.py` configured by PET_*), train on the local
cluster's real node (tests/cluster/realnode.py) from the trainer-frameworks image that
`make images` pushed, 2 pods of one process each: world size 2. The four jobs are applied
at once and run side by side; this checkout's operator (a process on this machine) plans
them. Each rank prints its rank, the world size and a checksum of its final weights: the
ranks must be 0 and 1 of 2 (a framework that missed the other process trains alone, with
world size 1, and would still print identical weights) and their checksums equal.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cluster.images import FRAMEWORKS_IMAGE
from cluster.localcluster import LocalCluster
from cluster.registry import local_name
from support.jobs import JobEnv
from support.operator_process import OperatorProcess
from support.real_pods import on_real_node, pod_log
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {"lightning": "lightning-ddp.yaml", "accelerate": "accelerate-ddp.yaml"}
LAUNCHERS = ("Script", "Torchrun")
CASES = [(framework, launcher) for framework in EXAMPLES for launcher in LAUNCHERS]
DONE = re.compile(
    r"\[rank (\d+)\] done \| world size (\d+) \| val accuracy ([0-9.]+)"
    r" \| weights sha256 ([0-9a-f]{64})"
)
# Four jobs of two pods on the two-core machine, each process importing torch and its
# framework: a few minutes together.
TRAIN_TIMEOUT = 480


def job_name(framework: str, launcher: str) -> str:
    return f"{framework}-{launcher.lower()}"


def job(framework: str, launcher: str) -> dict[str, Any]:
    """The framework's example as written, renamed and run with `launcher`: the script
    started by `python` (Script) or by `torchrun` (Torchrun), its args unchanged."""
    manifest: dict[str, Any] = yaml.safe_load((REPO / "examples" / EXAMPLES[framework]).read_text())
    manifest["metadata"]["name"] = job_name(framework, launcher)
    manifest["spec"]["launcher"] = launcher
    trainer = manifest["spec"]["template"]["spec"]["containers"][0]
    script = trainer["command"][-1]
    assert script.startswith("examples/scripts/"), trainer["command"]
    trainer["command"] = ["torchrun" if launcher == "Torchrun" else "python", script]
    return on_real_node(manifest)


@pytest.fixture(scope="module")
def frameworks(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[JobEnv]:
    """A namespace with this checkout's operator watching it and every case's job applied."""
    ref = local_name(FRAMEWORKS_IMAGE)
    assert installed_crd.registry.digest(ref) is not None, (
        f"{ref} not in the local registry: run `make images` first"
    )
    namespace = f"frameworks-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    log = tmp_path_factory.mktemp("frameworks") / "operator.log"
    operator = OperatorProcess(installed_crd.kubeconfig, namespace, log)
    operator.start()
    env = JobEnv(installed_crd, api_client, core, namespace)
    try:
        for framework, launcher in CASES:
            env.apply(job(framework, launcher))
        yield env
    finally:
        operator.stop()
        core.delete_namespace(namespace)


def finished(env: JobEnv, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        status = env.status(name)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    return wait_for(done, f"{name} finished", timeout=TRAIN_TIMEOUT, interval=2)


@pytest.mark.parametrize(("framework", "launcher"), CASES, ids=[job_name(*c) for c in CASES])
def test_trains_on_two_pods_with_identical_weights_on_every_rank(
    frameworks: JobEnv, framework: str, launcher: str
) -> None:
    name = job_name(framework, launcher)
    status = finished(frameworks, name)
    logs = [pod_log(frameworks.cluster, frameworks.namespace, f"{name}-{i}") for i in (0, 1)]
    assert status["phase"] == "Succeeded", (status, [log[-3000:] for log in logs])
    ends = [DONE.findall(log) for log in logs]
    assert all(len(end) == 1 for end in ends), [log[-3000:] for log in logs]
    (rank0, world0, accuracy0, weights0), (rank1, world1, _, weights1) = ends[0][0], ends[1][0]
    # Pod i runs rank i of 2: each process joined the other, none trained alone.
    assert (rank0, world0, rank1, world1) == ("0", "2", "1", "2")
    assert weights0 == weights1
    assert float(accuracy0) >= 0.9

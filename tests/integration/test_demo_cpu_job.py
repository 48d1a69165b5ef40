"""The demo's promise (README, `make demo`): a CPU-only job applied as written,
examples/cpu-ddp.yaml with no toleration and no nodeSelector, lands on the real node, trains
there, Succeeds, and `mgj get` and `kubectl get mgj` show its final progress, 100%.

On the demo cluster's shape (tests/cluster/demo.py, `real_node_takes_cpu_jobs`): the real
node is the only node a CPU-only pod can land on. The tests' shared cluster differs in two
ways that keep other tests' simulated pods off the real node: a simulated CPU node, and a
taint on the real node. For as long as this job's pods are being placed, the simulated CPU
nodes are cordoned (the demo deletes them; other tests need them back) and the taint is
lifted as the demo lifts it; then both are restored (placed pods stay). Should the real node
need a toleration or a label the example lacks, the pods stay Pending and the test fails.

A second job, placed on the real node the tests' way, turns its metrics port off, so the
operator reads no progress at all: what `kubectl get mgj` shows then comes from the pods'
termination messages, which the trainer fills when training ends.

The operator is this checkout's, a process on this machine (support/operator_process.py);
the trainer is the image `make images` pushed, pulled by the example's published name
through the node's registry mirror, as in the demo.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.demo import real_node_takes_cpu_jobs
from cluster.localcluster import LocalCluster
from cluster.realnode_config import NODE_NAME, NODE_TAINT
from support.jobs import JobEnv
from support.operator_process import OperatorProcess
from support.real_pods import on_real_node, pod_log, unpushed_images
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples/cpu-ddp.yaml"
SIMULATED_CPU_NODES = "type=kwok,!nvidia.com/gpu.present"
TRAIN_TIMEOUT = 600  # the demo's


@contextlib.contextmanager
def demo_shape(cluster: LocalCluster) -> Iterator[None]:
    """The demo's layout until the block ends: the simulated CPU nodes cordoned, the real
    node without the tests' taint (lifted by the demo's own code)."""
    kubectl = cluster.kubectl
    names = kubectl("get", "nodes", "-l", SIMULATED_CPU_NODES, "-o", "name").stdout.split()
    for node in names:
        kubectl("cordon", node)
    try:
        real_node_takes_cpu_jobs(cluster, delete_simulated_cpu_nodes=False)
        yield
    finally:
        taint = f"{NODE_TAINT['key']}={NODE_TAINT['value']}:{NODE_TAINT['effect']}"
        kubectl("taint", "nodes", NODE_NAME, taint, "--overwrite")
        for node in names:
            kubectl("uncordon", node, check=False)


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


def placed(real: JobEnv, name: str, replicas: int) -> list[Any] | None:
    pods = real.pods(name)
    if len(pods) == replicas and all(p.spec.node_name for p in pods):
        return pods
    return None


def finished(real: JobEnv, name: str) -> dict[str, Any] | None:
    status = real.status(name)
    return status if status.get("phase") in ("Succeeded", "Failed") else None


def printed_columns(cluster: LocalCluster, namespace: str, name: str) -> dict[str, str]:
    """`kubectl get mgj NAME`: the printer columns by header."""
    shown = cluster.kubectl("get", "mgj", name, "-n", namespace).stdout.splitlines()
    header, row = shown[0], shown[1]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    ends = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, ends, strict=True)}


def test_the_cpu_example_as_written_trains_on_the_real_node_and_shows_100_percent(
    real: JobEnv, operator: OperatorProcess
) -> None:
    example = yaml.safe_load(EXAMPLE.read_text())
    name, replicas = example["metadata"]["name"], example["spec"]["replicas"]
    pod_spec = example["spec"]["template"]["spec"]
    assert "tolerations" not in pod_spec
    assert "nodeSelector" not in pod_spec
    kubectl = real.cluster.kubectl
    with demo_shape(real.cluster):
        kubectl("apply", "-n", real.namespace, "-f", str(EXAMPLE))  # the file itself
        try:
            pods = wait_for(lambda: placed(real, name, replicas), "the pods placed", 120, 1)
        except AssertionError:
            print(kubectl("describe", "pods", "-n", real.namespace, check=False).stdout)
            raise
    assert {p.spec.node_name for p in pods} == {NODE_NAME}, [p.spec.node_name for p in pods]

    try:
        status = wait_for(
            lambda: finished(real, name),
            f"{name} finished",
            TRAIN_TIMEOUT,
            2,
        )
    finally:
        for index in range(replicas):
            log = pod_log(real.cluster, real.namespace, f"{name}-{index}")
            print(f"--- {name}-{index} (end of its log) ---\n{log[-3000:]}")
    assert status["phase"] == "Succeeded", json.dumps(status, indent=1)
    progress = status.get("progress") or {}
    assert progress.get("percent") == 100, status
    assert progress.get("summary") == "100%", status
    assert progress.get("step") == progress.get("totalSteps"), status

    # Each pod's trainer left its last progress in its termination message (read by the
    # operator when a job ends before its first reading of the processes).
    for pod in real.pods(name):
        (trainer,) = [c for c in pod.status.container_statuses if c.name == "trainer"]
        message = trainer.state.terminated.message or ""
        assert message.startswith(f"Progress: step={progress['step']} "), message

    columns = printed_columns(real.cluster, real.namespace, name)
    assert (columns["PHASE"], columns["PROGRESS"]) == ("Succeeded", "100%"), columns

    # As a user runs it: the console script, the cluster's kubeconfig, this checkout's code.
    user = {"KUBECONFIG": str(real.cluster.kubeconfig), "PYTHONPATH": os.pathsep.join(sys.path)}
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "mgj"), "get", name, "-n", real.namespace],
        env={**os.environ, **user},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Phase:     Succeeded" in shown.stdout, shown.stdout
    assert f"Progress:  100% (step {progress['step']} of {progress['totalSteps']})" in shown.stdout
    for index in range(replicas):
        assert f" {name}-{index} " in shown.stdout, shown.stdout
    assert NODE_NAME in shown.stdout, shown.stdout


def test_a_job_whose_progress_is_never_read_shows_what_its_trainers_left(real: JobEnv) -> None:
    """With the metrics port off (0) no process serves its gauges and the operator reads
    none: the final progress comes from the pods' termination messages alone."""
    job = on_real_node(yaml.safe_load(EXAMPLE.read_text()), cpu="500m", memory="2Gi")
    name = job["metadata"]["name"] = "unread"
    trainer = job["spec"]["template"]["spec"]["containers"][0]
    trainer["env"] = [{"name": "MGJ_TRAINER_METRICS_PORT", "value": "0"}]
    real.apply(job)
    status = wait_for(lambda: finished(real, name), f"{name} finished", TRAIN_TIMEOUT, 2)
    assert status["phase"] == "Succeeded", json.dumps(status, indent=1)
    progress = status.get("progress") or {}
    assert (progress.get("percent"), progress.get("summary")) == (100, "100%"), status
    assert progress.get("step") == progress.get("totalSteps"), status
    assert "lastProgressTime" not in progress, status  # no gauge was ever read

"""examples/notebook/train_from_python.py, run as a script against the local cluster: a
DistributedDataParallel job created from a dict through multigpu_operator.client, its
pods on the real node (tests/cluster/realnode.py), its logs streamed, its end waited for,
the async client's summary, and the job deleted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.images import TRAINER_IMAGE
from support.jobs import JobEnv, job_manifest
from support.operator_process import OperatorProcess
from support.real_pods import on_real_node
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/notebook/train_from_python.py"


def test_the_notebook_example_trains_streams_and_cleans_up(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    assert TRAINER_IMAGE in jobs.cluster.real_node.image_labels(), (
        f"{TRAINER_IMAGE} not on the real node: run `make images` first"
    )
    placed = on_real_node(job_manifest("placed"))["spec"]["template"]["spec"]
    env = {
        **os.environ,
        "KUBECONFIG": str(jobs.cluster.kubeconfig),
        "PYTHONPATH": os.pathsep.join(sys.path),
        "MGJ_EXAMPLE_NAMESPACE": jobs.namespace,
        "MGJ_EXAMPLE_IMAGE": TRAINER_IMAGE,
        "MGJ_EXAMPLE_POD": json.dumps(
            {"nodeSelector": placed["nodeSelector"], "tolerations": placed["tolerations"]}
        ),
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    created = re.search(r"^created (notebook-ddp-[a-z0-9]+)$", out, re.MULTILINE)
    assert created, out
    name = created[1]
    for index in (0, 1):
        assert f"replica {index}: {name}-{index} on real-node, Running\n" in out
        streamed = [line for line in out.splitlines() if line.startswith(f"[{name}-{index} ")]
        assert any(f"rank={index}/2" in line for line in streamed), out
    assert re.search(rf"^\[{name}-0 r0\] .*final test_accuracy=", out, re.MULTILINE), out
    assert f"{name} Succeeded: 2 pods succeeded\n" in out
    assert f"{name}: Succeeded, attempt 1\n" in out  # the async client's summary
    assert re.search(r"^  rank 0's last line: \S", out, re.MULTILINE), out
    assert out.endswith(f"{name} deleted\n")
    listed = ("get", "mgj", "-n", jobs.namespace, "-o", "name")
    wait_for(lambda: jobs.cluster.kubectl(*listed).stdout == "", f"{name} gone", timeout=60)

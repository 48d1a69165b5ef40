"""Benchmark: the pure pass, `reconcile.decide()`, on one job, without a cluster.

Not a test: it prints figures, never asserts on time. Each case is a job whose pods all
run (the pass the operator makes most: a pod changed, nothing to do), timed over
`--passes` calls after a few warm-up passes:

    .venv/bin/python tests/bench/bench_decide.py [--pods 8 64 512] [--passes 2000]

Every case prints microseconds per pass and its ratio to the first case's per-pod cost,
measured in the same process (this machine is noisy: compare commits by running the
script of each in a row, `PYTHONPATH=<checkout>/operator`).
"""

from __future__ import annotations

import argparse
import copy
import time
from datetime import UTC, datetime
from typing import Any

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.inputs import PassInputs
from multigpu_operator.reconcile import decide, plan_object

NOW = datetime(2026, 11, 27, 10, 0, 0, tzinfo=UTC)
UID = "job-uid"


def planned(pods: int) -> tuple[Job, DesiredState]:
    body = {
        "apiVersion": "multigpu.dev/v1alpha1",
        "kind": "MultiGPUJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {
            "mode": "DistributedDataParallel",
            "replicas": pods,
            "gpusPerReplica": 1,
            "template": {"spec": {"containers": [{"name": "trainer", "image": "t:1"}]}},
        },
    }
    result = plan_object(body)
    assert not isinstance(result, str), result
    return result


def running(desired: DesiredState) -> list[dict[str, Any]]:
    """The desired pods as the pod cache holds them once they all run."""
    pods = []
    for wanted in desired.pods:
        pod = copy.deepcopy(wanted)
        pod["metadata"]["uid"] = f"uid-{pod['metadata']['name']}"
        pod["metadata"]["ownerReferences"] = [{"uid": UID, "controller": True}]
        pod["spec"]["nodeName"] = "node-0"
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "trainer", "ready": True, "restartCount": 0, "state": {"running": {}}}
            ],
        }
        pods.append(pod)
    return pods


def steady_status(job: Job, desired: DesiredState, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The status the passes before have written: the job Running."""
    status: dict[str, Any] = {}
    for _ in range(3):
        status = decide(pass_inputs(job, desired, pods, status)).status.as_api()
    return status


def pass_inputs(
    job: Job, desired: DesiredState, pods: list[dict[str, Any]], status: dict[str, Any]
) -> PassInputs:
    """What the controller hands a pass: the stored status read as the controller reads
    it (JobStatus.read, once per pass)."""
    return PassInputs(
        planned=(job, desired),
        previous=JobStatus.read(status),
        generation=job.generation,
        now=NOW,
        pods=tuple(pods),
    )


def per_pass(pods: int, passes: int) -> float:
    job, desired = planned(pods)
    observed = running(desired)
    status = steady_status(job, desired, observed)
    start = time.perf_counter()
    for _ in range(passes):
        decide(pass_inputs(job, desired, observed, status))
    return (time.perf_counter() - start) / passes * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--passes", type=int, default=2000)
    args = parser.parse_args()
    base = None
    for pods in args.pods:
        micros = per_pass(pods, max(10, args.passes * 8 // pods))
        base = base or micros / pods
        print(f"{pods:5d} pods: {micros:9.0f} us per pass  ({micros / pods / base:.2f}x per pod)")


if __name__ == "__main__":
    main()

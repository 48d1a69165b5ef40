"""Builders for the policy steps' table-driven tests: a job as the API server hands it
over, its pods as the cache shows them, and the snapshot (Observed) a step reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.plan import DesiredState, plan_job
from multigpu_operator.policy.inputs import PassInputs
from multigpu_operator.policy.step import Observed, Progress
from multigpu_operator.policy.training import TrainingReport

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "train:1"}]}}
GPU_SHORTAGE = "0/5 nodes are available: 4 Insufficient nvidia.com/gpu"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    """T0 + `seconds` as the API server writes it."""
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(mode: str = "DistributedDataParallel", **spec: Any) -> Job:
    """`spec` keys are the CRD's (camelCase); two CPU replicas unless given."""
    return Job.from_object(
        {
            "metadata": {"name": "job", "namespace": "ns", "uid": "uid-1", "generation": 1},
            "spec": {
                "mode": mode,
                "replicas": 2,
                "gpusPerReplica": 0,
                "template": TEMPLATE,
                **spec,
            },
        }
    )


def elastic_job(replicas: int = 3, **spec: Any) -> Job:
    limits = {"minReplicas": 2, "maxReplicas": 4, **spec.pop("elastic", {})}
    return job("Elastic", replicas=replicas, elastic=limits, **spec)


def pod(
    index: int,
    phase: str = "Pending",
    *,
    attempt: int = 1,
    node: str | None = None,
    exit_code: int | None = None,
    finished: float = 0,
    deleting: bool = False,
    scheduled: str | None = None,
    message: str = GPU_SHORTAGE,
    disrupted: bool = False,
) -> dict[str, Any]:
    """Replica `index` of the job. `scheduled`: the reason of a PodScheduled=False
    condition (Unschedulable, SchedulingGated); `finished`: seconds after T0."""
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        term = {"exitCode": exit_code, "reason": "Error", "finishedAt": stamp(finished)}
        status["containerStatuses"] = [{"name": "trainer", "state": {"terminated": term}}]
    conditions = []
    if scheduled:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": scheduled, "message": message}
        )
    if disrupted:
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "PodGC"})
    if conditions:
        status["conditions"] = conditions
    metadata: dict[str, Any] = {
        "name": f"job-{index}",
        "uid": f"uid-{index}-{attempt}",
        "labels": {
            "multigpu.dev/job-name": "job",
            "multigpu.dev/replica-index": str(index),
            "multigpu.dev/attempt": str(attempt),
        },
    }
    if deleting:
        metadata["deletionTimestamp"] = stamp(0)
    spec = {"nodeName": node} if node else {}
    return {"metadata": metadata, "spec": spec, "status": status}


def running(*indexes: int, attempt: int = 1) -> list[dict[str, Any]]:
    return [pod(i, "Running", attempt=attempt, node="gpu-node-0") for i in indexes]


def written(ctype: str, status: bool = True, reason: str = "Reason") -> dict[str, Any]:
    """A condition as an earlier pass wrote it."""
    return {
        "type": ctype,
        "status": "True" if status else "False",
        "reason": reason,
        "message": "written before",
        "lastTransitionTime": stamp(-3600),
        "observedGeneration": 1,
    }


def observed(
    j: Job | None = None,
    pods: list[dict[str, Any]] | None = None,
    previous: dict[str, Any] | None = None,
    now: float = 0,
    nodes: list[dict[str, Any]] | None = None,
    training: TrainingReport | None = None,
) -> Observed:
    """What a step sees: `j` (a two-replica DDP job by default), `now` seconds after T0,
    the cluster's `nodes` (unknown by default) and what the processes reported."""
    j = j or job()
    return Observed(
        j,
        plan_job(j),
        tuple(pods or ()),
        JobStatus.read(previous or {}),
        at(now),
        tuple(nodes or ()),
        training=training,
    )


def inputs(
    j: Job,
    pods: Sequence[Mapping[str, Any]] = (),
    previous: Mapping[str, Any] | None = None,
    now: datetime = T0,
    desired: DesiredState | None = None,
    **fields: Any,
) -> PassInputs:
    """A pass's inputs for `j` (planned here unless `desired` is given), with the
    previous status as the API server stores it; `fields` name the others."""
    return PassInputs(
        planned=(j, desired or plan_job(j)),
        previous=JobStatus.read(previous or {}),
        generation=j.generation,
        now=now,
        pods=tuple(pods),
        **fields,
    )


def gpu_node(name: str, gpus: int = 8) -> dict[str, Any]:
    """A GPU node as the node informer keeps it (cluster/nodes.py)."""
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus)}},
    }


def progress(attempt: int = 1, restarts: int = 0, start: float = 0) -> Progress:
    return Progress(attempt=attempt, restarts=restarts, start=at(start))

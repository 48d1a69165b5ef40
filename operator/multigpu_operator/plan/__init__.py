"""The planner (pure): a MultiGPUJob -> the child objects it should have, as JSON-ready dicts.

No I/O here. The same job always gives byte-identical objects, so comparing or
re-creating them is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.plan import env
from multigpu_operator.plan.errors import FieldConflict, FieldConflicts, PlanError
from multigpu_operator.plan.modes import ModeLayout, data_parallel, ddp, elastic, model_parallel
from multigpu_operator.plan.pod import build_pod
from multigpu_operator.plan.service import build_service

__all__ = ["DesiredState", "FieldConflict", "PlanError", "plan_job"]

_MODES: Mapping[Mode, Callable[[Job, int], ModeLayout]] = {
    Mode.DATA_PARALLEL: data_parallel.layout,
    Mode.DISTRIBUTED_DATA_PARALLEL: ddp.layout,
    Mode.MODEL_PARALLEL: model_parallel.layout,
    Mode.ELASTIC: elastic.layout,
}


@dataclass(frozen=True)
class DesiredState:
    service: dict[str, Any]  # the job's headless Service
    pods: tuple[dict[str, Any], ...]  # in index order, pods[i] named names.pod_name(job, i)
    world_size: int | None  # processes; None for Elastic (decided by rendezvous)


def plan_job(job: Job, replicas: int | None = None) -> DesiredState:
    """The Service and pods `job` should have; `replicas` overrides spec.replicas
    (an elastic job being scaled). Raises PlanError naming every field to fix.

    `job` is one the API server validated (the CRD's bounds and name rules, so every pod
    name is a DNS label); the planner checks what that validation cannot see: the pod
    template against what the operator sets (plan/pod.py) and the `replicas` override,
    and refuses, rather than fails on, a mode without what it needs (a job stored before
    the CRD's rules said so).
    """
    n = job.spec.replicas if replicas is None else _check_override(job, replicas)
    layout = _MODES[job.spec.mode](job, n)
    conflicts = FieldConflicts()
    pods = tuple(
        build_pod(job, i, [*env.common_env(job, i, n), *layout.env[i]], conflicts) for i in range(n)
    )
    conflicts.raise_any()
    return DesiredState(service=build_service(job), pods=pods, world_size=layout.world_size)


def _check_override(job: Job, replicas: int) -> int:
    """The API server checked spec.replicas, never an override of it."""
    policy = job.spec.elastic
    if job.spec.mode is not Mode.ELASTIC or policy is None:
        return replicas
    if not policy.min_replicas <= replicas <= policy.max_replicas:
        raise PlanError(
            "spec.replicas",
            f"is {replicas}, outside spec.elastic [{policy.min_replicas}, {policy.max_replicas}]",
        )
    return replicas

"""The planner (pure): a MultiGPUJob -> the child objects it should have, as JSON-ready dicts.

No I/O here. The same job always gives byte-identical objects, so comparing or
re-creating them is safe.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.spec import MAX_NAME_LENGTH, Job, Mode
from multigpu_operator.plan import env
from multigpu_operator.plan.errors import PlanError
from multigpu_operator.plan.modes import ModeLayout, data_parallel, ddp, elastic, model_parallel
from multigpu_operator.plan.pod import build_pod
from multigpu_operator.plan.service import build_service

__all__ = ["DesiredState", "PlanError", "plan_job"]

_MODES: Mapping[Mode, Callable[[Job, int], ModeLayout]] = {
    Mode.DATA_PARALLEL: data_parallel.layout,
    Mode.DISTRIBUTED_DATA_PARALLEL: ddp.layout,
    Mode.MODEL_PARALLEL: model_parallel.layout,
    Mode.ELASTIC: elastic.layout,
}

# The Service is named after the job, and Service names are DNS-1035 labels.
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_LABEL_MAX = 63


@dataclass(frozen=True)
class DesiredState:
    service: dict[str, Any]  # the job's headless Service
    pods: tuple[dict[str, Any], ...]  # in index order, pods[i] named names.pod_name(job, i)
    world_size: int | None  # processes; None for Elastic (decided by rendezvous)


def plan_job(job: Job, replicas: int | None = None) -> DesiredState:
    """The Service and pods `job` should have; `replicas` overrides spec.replicas
    (an elastic job being scaled). Raises PlanError naming the field to fix."""
    n = job.spec.replicas if replicas is None else replicas
    _check(job, n)
    layout = _MODES[job.spec.mode](job, n)
    pods = tuple(build_pod(job, i, [*env.common_env(job, i, n), *layout.env[i]]) for i in range(n))
    return DesiredState(service=build_service(job), pods=pods, world_size=layout.world_size)


def _check(job: Job, replicas: int) -> None:
    """What every mode needs; the mode modules check their own settings."""
    spec = job.spec
    name = job.ref.name
    if not _DNS_1035_LABEL.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise PlanError(
            "metadata.name",
            f"{name!r} must be at most {MAX_NAME_LENGTH} lowercase letters, digits and '-', "
            "starting with a letter and ending with a letter or digit (it names the "
            "job's Service and pod hostnames)",
        )
    if replicas < 1:
        raise PlanError("spec.replicas", f"is {replicas}; must be at least 1")
    if len(names.pod_name(name, replicas - 1)) > _DNS_LABEL_MAX:
        raise PlanError("spec.replicas", f"is {replicas}: pod hostnames would exceed 63 characters")
    if spec.gpus_per_replica < 0:
        raise PlanError("spec.gpusPerReplica", f"is {spec.gpus_per_replica}; must be at least 0")
    if not 1 <= spec.master_port <= 65535:
        raise PlanError("spec.masterPort", f"is {spec.master_port}; must be in 1-65535")
    # Settings for another mode would be silently ignored.
    if spec.elastic is not None and spec.mode is not Mode.ELASTIC:
        raise PlanError("spec.elastic", f"is only used when spec.mode is Elastic, not {spec.mode}")
    if spec.model_parallel is not None and spec.mode is not Mode.MODEL_PARALLEL:
        raise PlanError(
            "spec.modelParallel", f"is only used when spec.mode is ModelParallel, not {spec.mode}"
        )

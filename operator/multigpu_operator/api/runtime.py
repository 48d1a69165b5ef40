"""Runtimes: a platform team's blueprints for MultiGPUJobs, declared once.

A `MultiGPURuntime` (namespaced) or `ClusterMultiGPURuntime` (cluster-scoped) holds
defaults for anything a job sets: the mode, launcher, GPUs, the pod template, runPolicy,
placement, the Kueue queue and the master port. A job names one in `spec.runtimeRef` and
writes only what differs; api/runtime_merge.py merges the two (the job's own fields win)
and lists the rules. A runtime may lock fields (`lockedFields`): a job that sets one to
another value fails naming the field. Kubeflow Trainer v2's TrainingRuntime and
ClusterTrainingRuntime are the model.

The runtime's spec is generated from the job's (`JobSpec`): every field a job sets, each
optional and without a server default (a runtime states what it means to fix; the rest
keeps the job's defaults), with the same bounds and descriptions. Cross-field rules are
checked on the merged job, not on the runtime alone.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

from pydantic import Field, create_model
from pydantic.fields import FieldInfo

from multigpu_operator.api.base import ApiModel
from multigpu_operator.api.kueue import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from multigpu_operator.api.runtime_ref import (
    CLUSTER_RUNTIME_KIND,
    RUNTIME_KIND,
    RuntimeKind,
    RuntimeRef,
)
from multigpu_operator.api.spec import GROUP, JobSpec

RUNTIME_PLURAL = "multigpuruntimes"
RUNTIME_SHORT_NAME = "mgjrt"
CLUSTER_RUNTIME_PLURAL = "clustermultigpuruntimes"
CLUSTER_RUNTIME_SHORT_NAME = "cmgjrt"
# The most field paths one runtime locks.
MAX_LOCKED_FIELDS = 64
# A locked field's path: spec fields by their JSON names, list items by name in
# brackets, e.g. template.spec.containers[trainer].image or queueName.
_STEP = r"[A-Za-z][A-Za-z0-9]*(\[[-A-Za-z0-9_.]+\])?"
LOCKED_FIELD_PATTERN = rf"^{_STEP}(\.{_STEP})*$"


# Job fields a runtime does not hold: who runs the job, whether it is suspended, and
# the reference itself.
_JOB_ONLY = frozenset({"managed_by", "suspend", "runtime_ref"})


class _RuntimeFields(ApiModel):
    queue_name: str | None = Field(
        None,
        min_length=1,
        description=(
            f"Kueue LocalQueue of the jobs that use this runtime (their {QUEUE_NAME_LABEL} "
            "label, which wins when a job has it)."
        ),
    )
    priority_class: str | None = Field(
        None,
        min_length=1,
        description=(
            f"Kueue WorkloadPriorityClass of those jobs (their {PRIORITY_CLASS_LABEL} label wins)."
        ),
    )
    locked_fields: list[Annotated[str, Field(pattern=LOCKED_FIELD_PATTERN)]] | None = Field(
        None,
        max_length=MAX_LOCKED_FIELDS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description=(
            "Fields a job may not set to another value than this runtime's, as paths "
            "below spec with list items by name: e.g. "
            "template.spec.containers[trainer].image, queueName, runPolicy.backoffLimit. "
            "A job that does fails (InvalidSpec) naming the field."
        ),
    )


def _optional(info: FieldInfo) -> FieldInfo:
    """`info` as a runtime field: optional, no default, the job's bounds."""
    out = copy.copy(info)
    out.default = None
    out.default_factory = None
    out.annotation = info.annotation | None  # type: ignore[operator,assignment]
    if isinstance(info.json_schema_extra, dict):
        extra = {k: v for k, v in info.json_schema_extra.items() if k != "default"}
        out.json_schema_extra = extra or None
    if info.description:
        out.description = f"Default for the jobs that use this runtime. {info.description}"
    return out


def _runtime_spec_fields() -> dict[str, Any]:
    return {
        name: (_optional(info).annotation, _optional(info))
        for name, info in JobSpec.model_fields.items()
        if name not in _JOB_ONLY
    }


RuntimeSpec: type[_RuntimeFields] = create_model(
    "RuntimeSpec",
    __base__=_RuntimeFields,
    __doc__=(
        "Defaults for the MultiGPUJobs that name this runtime in spec.runtimeRef; each "
        "field means what the job's field of the same name means."
    ),
    **_runtime_spec_fields(),
)


class RuntimeMeta(ApiModel):
    name: str | None = None


class MultiGPURuntime(ApiModel):
    """A blueprint for MultiGPUJobs in this namespace: defaults for anything a job sets,
    and fields jobs may not change. A job names it in spec.runtimeRef."""

    api_version: str | None = None
    kind: str | None = None
    metadata: RuntimeMeta | None = None
    spec: RuntimeSpec


class ClusterMultiGPURuntime(MultiGPURuntime):
    """A blueprint for MultiGPUJobs in every namespace: defaults for anything a job sets,
    and fields jobs may not change. A job names it in spec.runtimeRef (the default kind)."""


__all__ = [
    "CLUSTER_RUNTIME_KIND",
    "GROUP",
    "RUNTIME_KIND",
    "ClusterMultiGPURuntime",
    "MultiGPURuntime",
    "RuntimeKind",
    "RuntimeRef",
    "RuntimeSpec",
]

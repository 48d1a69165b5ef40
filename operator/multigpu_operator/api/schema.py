"""The OpenAPI v3 schema of a MultiGPUJob, generated from its typed declaration.

The root object is declared here; its spec (api/spec.py, api/lifecycle.py,
api/template.py) and status (api/status.py) are declared beside it, and api/openapi.py
turns them into the CRD's structural schema with the CEL rules of api/rules.py.
api/validation.py validates and defaults against this same schema offline (`mgj render`).
"""

from __future__ import annotations

import copy
import functools

from multigpu_operator.api.base import ApiModel
from multigpu_operator.api.openapi import Schema, structural_schema
from multigpu_operator.api.rules import NAME_RULES, SPEC_RULES
from multigpu_operator.api.runtime_ref import RUNTIME_REF_RULES, RUNTIME_SUPPLIED, unless_runtime
from multigpu_operator.api.spec import JobSpec
from multigpu_operator.api.status import JobStatus


class ObjectMeta(ApiModel):
    # Declaring metadata.name lets the name rules point fieldPath at it; the API server
    # validates the rest of metadata itself.
    name: str | None = None


class MultiGPUJob(ApiModel):
    """A multi-GPU PyTorch training job: the operator creates one pod per replica, wired
    for the chosen mode (DataParallel, DistributedDataParallel, ModelParallel or
    Elastic), and a headless Service that gives the pods stable DNS names."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: JobSpec
    status: JobStatus | None = None


# Each object's cross-field rules, in the CRD as x-kubernetes-validations.
# A job with spec.runtimeRef may leave out what its runtime supplies, and is checked
# by the other rules once merged with it (api/runtime_ref.py).
RULES = {
    JobSpec: (*RUNTIME_REF_RULES, *(unless_runtime(r) for r in SPEC_RULES)),
    MultiGPUJob: NAME_RULES,
}


@functools.cache
def _root_schema() -> Schema:
    schema = structural_schema(MultiGPUJob, RULES)
    spec = schema["properties"]["spec"]
    spec["required"] = [f for f in spec["required"] if f not in RUNTIME_SUPPLIED]
    if not spec["required"]:
        del spec["required"]
    return schema


def root_schema() -> Schema:
    """The schema of the whole object (a copy: callers may change it)."""
    return copy.deepcopy(_root_schema())


def spec_schema() -> Schema:
    """The schema of `spec`, with its cross-field rules."""
    spec: Schema = root_schema()["properties"]["spec"]
    return spec

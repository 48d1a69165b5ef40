"""Cross-field rules of a MultiGPUJob, each as CEL beside its Python twin.

The CEL goes into the CRD (api/schema.py attaches it) and runs on the API server; the
Python twin runs offline in `validate()` (api/validation.py). Both report the same
message, defined once here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.spec import (
    DEFAULT_REPLICAS,
    MAX_NAME_LENGTH,
    Launcher,
    Mode,
)

Spec = Mapping[str, Any]

# DNS-1035 label: the job name becomes a Service name, and Services require it.
DNS1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"

# One message per rule, shown by the API server and by `validate()`.
MSG_DATA_PARALLEL_REPLICAS = (
    "spec.replicas must be 1 when spec.mode is DataParallel: one process drives all GPUs of one "
    "pod; use DistributedDataParallel to train across several pods"
)
MSG_ELASTIC_REQUIRED = (
    "spec.elastic (minReplicas, maxReplicas) is required when spec.mode is Elastic"
)
MSG_ELASTIC_ONLY_FOR_ELASTIC = (
    "spec.elastic is only allowed when spec.mode is Elastic: remove spec.elastic or set "
    "spec.mode: Elastic"
)
MSG_ELASTIC_MIN_MAX = (
    "spec.elastic.minReplicas must be less than or equal to spec.elastic.maxReplicas"
)
MSG_ELASTIC_REPLICAS_RANGE = (
    "spec.replicas must be between spec.elastic.minReplicas and spec.elastic.maxReplicas when "
    f"spec.mode is Elastic (spec.replicas defaults to {DEFAULT_REPLICAS}): set spec.replicas "
    "inside that range, or scale the job within it"
)
MSG_ELASTIC_LAUNCHER = (
    "spec.launcher must be Torchrun when spec.mode is Elastic: elastic training needs "
    "torchrun's rendezvous; remove spec.launcher or set it to Torchrun"
)
MSG_MODEL_PARALLEL_ONLY = (
    "spec.modelParallel is only allowed when spec.mode is ModelParallel: remove "
    "spec.modelParallel or set spec.mode: ModelParallel"
)
MSG_MODEL_PARALLEL_STAGES = (
    "spec.modelParallel.stages must equal spec.replicas x max(spec.gpusPerReplica, 1) when "
    "spec.mode is ModelParallel with several replicas (one pipeline stage per process); omit "
    "spec.modelParallel.stages to get exactly that"
)
MSG_NAME_TOO_LONG = (
    f"metadata.name must be at most {MAX_NAME_LENGTH} characters: pods are named "
    "<name>-<index> and their hostnames must fit in 63 characters; choose a shorter name"
)
MSG_NAME_DNS1035 = (
    "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a "
    "letter and ending with a letter or digit): it becomes the job's Service name and the pods' "
    "hostnames"
)


@dataclass(frozen=True)
class Rule:
    """One rule as CEL (`self` is the object it is attached to, after defaulting) and the
    same rule in Python (`holds`, given that object as a dict with defaults applied)."""

    cel: str
    message: str
    holds: Callable[[Spec], bool]
    field_path: str | None = None

    def validation(self) -> dict[str, str]:
        out: dict[str, str] = {"rule": self.cel, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        return out


def _elastic_replicas_in_range(s: Spec) -> bool:
    e = s["elastic"]
    return bool(e["minReplicas"] <= s["replicas"] <= e["maxReplicas"])


def _stages_match_processes(s: Spec) -> bool:
    stages = s["modelParallel"].get("stages")
    return stages is None or stages == s["replicas"] * max(s["gpusPerReplica"], 1)


_ELASTIC = f"'{Mode.ELASTIC}'"
_MP = f"'{Mode.MODEL_PARALLEL}'"

# Attached to spec. CEL runs after defaulting, so replicas, gpusPerReplica and launcher are
# always present; the optional objects are guarded with has().
SPEC_RULES: tuple[Rule, ...] = (
    Rule(
        cel=f"self.mode != '{Mode.DATA_PARALLEL}' || self.replicas == 1",
        message=MSG_DATA_PARALLEL_REPLICAS,
        holds=lambda s: s["mode"] != Mode.DATA_PARALLEL or s["replicas"] == 1,
        field_path=".replicas",
    ),
    Rule(
        cel=f"self.mode != {_ELASTIC} || has(self.elastic)",
        message=MSG_ELASTIC_REQUIRED,
        holds=lambda s: s["mode"] != Mode.ELASTIC or "elastic" in s,
        field_path=".elastic",
    ),
    Rule(
        cel=f"!has(self.elastic) || self.mode == {_ELASTIC}",
        message=MSG_ELASTIC_ONLY_FOR_ELASTIC,
        holds=lambda s: "elastic" not in s or s["mode"] == Mode.ELASTIC,
        field_path=".elastic",
    ),
    Rule(
        cel="!has(self.elastic) || self.elastic.minReplicas <= self.elastic.maxReplicas",
        message=MSG_ELASTIC_MIN_MAX,
        holds=lambda s: (
            "elastic" not in s or s["elastic"]["minReplicas"] <= s["elastic"]["maxReplicas"]
        ),
        field_path=".elastic.minReplicas",
    ),
    Rule(
        cel=(
            f"self.mode != {_ELASTIC} || !has(self.elastic) || "
            "(self.elastic.minReplicas <= self.replicas && "
            "self.replicas <= self.elastic.maxReplicas)"
        ),
        message=MSG_ELASTIC_REPLICAS_RANGE,
        holds=lambda s: (
            s["mode"] != Mode.ELASTIC or "elastic" not in s or _elastic_replicas_in_range(s)
        ),
        field_path=".replicas",
    ),
    Rule(
        cel=f"self.mode != {_ELASTIC} || self.launcher == '{Launcher.TORCHRUN}'",
        message=MSG_ELASTIC_LAUNCHER,
        holds=lambda s: s["mode"] != Mode.ELASTIC or s["launcher"] == Launcher.TORCHRUN,
        field_path=".launcher",
    ),
    Rule(
        cel=f"!has(self.modelParallel) || self.mode == {_MP}",
        message=MSG_MODEL_PARALLEL_ONLY,
        holds=lambda s: "modelParallel" not in s or s["mode"] == Mode.MODEL_PARALLEL,
        field_path=".modelParallel",
    ),
    Rule(
        cel=(
            f"self.mode != {_MP} || self.replicas == 1 || !has(self.modelParallel) || "
            "!has(self.modelParallel.stages) || self.modelParallel.stages == "
            "self.replicas * (self.gpusPerReplica > 0 ? self.gpusPerReplica : 1)"
        ),
        message=MSG_MODEL_PARALLEL_STAGES,
        holds=lambda s: (
            s["mode"] != Mode.MODEL_PARALLEL
            or s["replicas"] == 1
            or "modelParallel" not in s
            or _stages_match_processes(s)
        ),
        field_path=".modelParallel.stages",
    ),
)

# Attached to the root object, where CEL sees metadata.name (given as `name` in Python).
NAME_RULES: tuple[Rule, ...] = (
    Rule(
        cel=f"size(self.metadata.name) <= {MAX_NAME_LENGTH}",
        message=MSG_NAME_TOO_LONG,
        holds=lambda o: len(o["metadata"]["name"]) <= MAX_NAME_LENGTH,
        field_path=".metadata.name",
    ),
    Rule(
        cel=f"self.metadata.name.matches('{DNS1035_LABEL}')",
        message=MSG_NAME_DNS1035,
        holds=lambda o: _matches(DNS1035_LABEL, o["metadata"]["name"]),
        field_path=".metadata.name",
    ),
)


def _matches(pattern: str, value: str) -> bool:
    # re.search, as the API server's Go regexp: the pattern carries its own anchors.
    return re.search(pattern, value) is not None

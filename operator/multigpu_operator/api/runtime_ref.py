"""spec.runtimeRef: the runtime (api/runtime.py) whose defaults a MultiGPUJob takes, and
status.runtime: the copy of it the job started with."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from pydantic import Field

from multigpu_operator.api.base import ApiModel, Int64, StatusModel
from multigpu_operator.api.rule import Rule

RUNTIME_KIND = "MultiGPURuntime"
CLUSTER_RUNTIME_KIND = "ClusterMultiGPURuntime"


class RuntimeKind(enum.StrEnum):
    RUNTIME = RUNTIME_KIND
    CLUSTER_RUNTIME = CLUSTER_RUNTIME_KIND


class RuntimeRef(ApiModel):
    """The runtime whose defaults this job takes: fields the job leaves out (or at their
    defaults) come from it; `mode` and `template` may then be left out. The job
    records the runtime's spec when it first starts (status.runtime), so later edits or
    the runtime's deletion change neither this attempt nor later ones."""

    kind: RuntimeKind = Field(
        RuntimeKind.CLUSTER_RUNTIME,
        description=(
            f"{CLUSTER_RUNTIME_KIND} (cluster-scoped, shared by every namespace) or "
            f"{RUNTIME_KIND} (in the job's namespace)."
        ),
    )
    name: str = Field(min_length=1, max_length=253, description="The runtime's name.")


# The fields a job must state unless its runtime does.
RUNTIME_SUPPLIED = ("mode", "template")
MSG_MODE_REQUIRED = "spec.mode is required unless spec.runtimeRef names a runtime that sets it"
MSG_TEMPLATE_REQUIRED = (
    "spec.template is required unless spec.runtimeRef names a runtime that sets it"
)

RUNTIME_REF_RULES: tuple[Rule, ...] = (
    Rule(
        cel="has(self.runtimeRef) || has(self.mode)",
        message=MSG_MODE_REQUIRED,
        field_path=".mode",
    ),
    Rule(
        cel="has(self.runtimeRef) || has(self.template)",
        message=MSG_TEMPLATE_REQUIRED,
        field_path=".template",
    ),
)


def unless_runtime(rule: Rule) -> Rule:
    """`rule` as the CRD checks it: a job with a runtimeRef is checked once merged with
    its runtime (by the operator, and by `mgj render`), since the fields a rule reads may
    come from the runtime. Transition rules that read no runtime-supplied field (an
    immutable managedBy or dnsNames) hold for every job. No rule reads the template."""
    if rule.transition and not any(f"self.{f}" in rule.cel for f in RUNTIME_SUPPLIED):
        return rule
    # Without a runtimeRef and a mode, the rule above is the one to report.
    return dataclasses.replace(rule, cel=f"has(self.runtimeRef) || !has(self.mode) || ({rule.cel})")


def _any_object(schema: dict[str, Any]) -> None:
    # An object kept as it is: structural schemas say so instead of additionalProperties.
    schema.pop("additionalProperties", None)
    schema["x-kubernetes-preserve-unknown-fields"] = True


class RuntimeSnapshot(StatusModel):
    """The runtime this job started with, as it was then: every pass merges the job with
    this copy, so a later edit or deletion of the runtime changes neither the running
    attempt nor later ones (new jobs take the runtime as it is)."""

    kind: RuntimeKind = Field(description="The runtime's kind.")
    name: str = Field(description="The runtime's name.")
    generation: Int64 | None = Field(None, description="Its metadata.generation then.")
    spec: dict[str, Any] = Field(json_schema_extra=_any_object, description="Its spec then.")

    @property
    def named(self) -> str:
        """How messages name it: "ClusterMultiGPURuntime gpu-ddp"."""
        return f"{self.kind} {self.name}"

"""The pod template of a job, as far as the CRD checks it.

These models exist for the schema only: the typed job keeps the template exactly as the
user wrote it (a dict), because the operator passes every field it does not set through
to the pods unchanged. The PodSpec schema is not embedded: it would make the CRD too
large for client-side `kubectl apply` (its last-applied annotation), and the API server
validates the pods in full when the operator creates them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PlainValidator

from multigpu_operator.api.base import ApiModel

TRAINER_CONTAINER = "trainer"

_PRESERVE_UNKNOWN_FIELDS = ConfigDict(
    json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
)


class Container(ApiModel):
    model_config = _PRESERVE_UNKNOWN_FIELDS

    name: str = Field(min_length=1, description="Container name (a DNS-1123 label).")


class PodSpec(ApiModel):
    """A core/v1 PodSpec, validated by the API server when the operator creates the
    pods (only containers[].name is checked here)."""

    model_config = _PRESERVE_UNKNOWN_FIELDS

    containers: list[Container] = Field(
        min_length=1,
        description=(
            f'Containers of the pod. The one named "{TRAINER_CONTAINER}" (else the first) '
            "runs the training; others run alongside it."
        ),
    )


class TemplateMetadata(ApiModel):
    """Labels and annotations copied to every pod."""

    labels: dict[str, str] | None = Field(None, description="Labels added to every pod.")
    annotations: dict[str, str] | None = Field(None, description="Annotations added to every pod.")


class PodTemplate(ApiModel):
    metadata: TemplateMetadata | None = None
    spec: PodSpec


def _as_written(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError("must be an object (a PodTemplateSpec)")
    return value


# The field type of spec.template: the schema of PodTemplate, the value as written.
Template = Annotated[
    Mapping[str, Any], PlainValidator(_as_written, json_schema_input_type=PodTemplate)
]


def trainer_index(containers: Sequence[Mapping[str, Any]]) -> int:
    """Which of a pod's containers trains: the one named "trainer", else the first."""
    return next((i for i, c in enumerate(containers) if c.get("name") == TRAINER_CONTAINER), 0)

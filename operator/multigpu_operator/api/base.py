"""Building blocks of the API declaration: the base model and the field markers.

Every object of the MultiGPUJob API is an `ApiModel`: camelCase on the wire, snake_case
in Python, immutable once read. The CRD schema is generated from these models
(api/openapi.py), so a model's docstring is its description in `kubectl explain`, and
`Field(default, ge=..., description=...)` states a field's default, bounds and
description once for the API server, offline validation and the typed job alike.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar, cast

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

# Kubernetes' integer formats: the API server stores int32 fields as 32-bit numbers.
Int32 = Annotated[int, Field(json_schema_extra={"format": "int32"})]
Int64 = Annotated[int, Field(json_schema_extra={"format": "int64"})]

# `X | None` means "may be omitted". A field that may also be given as null (and is
# then stored as null) says so: `Annotated[X | None, Nullable]`.
Nullable = Field(json_schema_extra={"nullable": True})


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        frozen=True,
    )


def _no_additional(schema: dict[str, Any]) -> None:
    # A structural schema lists its properties and may not also say additionalProperties.
    schema.pop("additionalProperties", None)


class StatusModel(ApiModel):
    """A part of the status: a field it does not declare is an error, not dropped (the
    API server with fieldValidation=Strict refuses it too)."""

    model_config = ConfigDict(**ApiModel.model_config, extra="forbid")
    model_config["json_schema_extra"] = _no_additional


M = TypeVar("M", bound=ApiModel)

# Models read, by their JSON: the statuses of the jobs whose passes run close together.
READ_CACHED = 512
# Datetimes, dataclasses and subclasses (enums) are not JSON as the API server sends it:
# such values are validated as they are, uncached.
_ONLY_JSON = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def read_cached(model: type[M], stored: Mapping[str, Any]) -> M:
    """`model.model_validate(stored)`, validated once per distinct JSON: a job's status is
    read by every pass and changes far less often. The model is shared, so it must never
    be changed in place (ApiModels are frozen; nobody changes their lists)."""
    try:
        raw = orjson.dumps(stored, option=_ONLY_JSON)
    except TypeError:
        return model.model_validate(stored)
    return cast(M, _validated(model, raw))


@functools.lru_cache(maxsize=READ_CACHED)
def _validated(model: type[ApiModel], raw: bytes) -> ApiModel:
    # Validated as Python values, as an uncached read is (not in pydantic's JSON mode).
    return model.model_validate(orjson.loads(raw))


def defaulted_object(model: type[ApiModel]) -> Any:
    """A sub-object the API server fills in as `{}` when omitted, and then its fields'
    defaults; the typed job gets the same object with every default."""
    return Field(default_factory=model, json_schema_extra={"default": {}})


def field_errors(error: ValidationError, root: str) -> str:
    """pydantic's message for each field of a model read at `root` (`spec`), naming the
    field as Kubernetes does: `spec.elastic.minReplicas: Input should be ...`."""
    lines = []
    for found in error.errors(include_url=False):
        field = root
        for part in found["loc"]:
            field += f"[{part}]" if isinstance(part, int) else f".{part}"
        lines.append(f"{field}: {found['msg']}")
    return "; ".join(lines)

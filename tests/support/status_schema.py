"""A job's status checked as the API server checks a status write with strict field
validation: against the status schema of the CRD generated from api/, a field the
schema does not declare being an error (the server's "unknown field"), not pruned."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from openapi_schema_validator import OAS30Validator

from multigpu_operator.api.crd import crd


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every object that lists its properties closed to others."""
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        schema.setdefault("additionalProperties", False)
    for sub in schema.get("properties", {}).values():
        _strict(sub)
    if isinstance(schema.get("items"), dict):
        _strict(schema["items"])
    if isinstance(schema.get("additionalProperties"), dict):
        _strict(schema["additionalProperties"])
    return schema


@functools.cache
def _validator() -> OAS30Validator:
    root = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return OAS30Validator(_strict(copy.deepcopy(root["properties"]["status"])))


def status_problems(status: Mapping[str, Any]) -> list[str]:
    """What the API server would refuse in `status`, one line a problem."""
    errors = _validator().iter_errors(dict(status))
    return sorted(
        f"status.{'.'.join(str(p) for p in e.absolute_path)}: {e.message}".replace(".:", ":")
        for e in errors
    )

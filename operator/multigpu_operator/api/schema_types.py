"""Small builders for OpenAPI v3 schema fragments shared by the CRD schema modules."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def integer(description: str, minimum: int, default: int | None = None, **extra: Any) -> Schema:
    out: Schema = {"type": "integer", "minimum": minimum, "description": description, **extra}
    if default is not None:
        out["default"] = default
    return out


def enum_of(description: str, values: list[str], default: str | None = None) -> Schema:
    out: Schema = {"type": "string", "enum": values, "description": description}
    if default is not None:
        out["default"] = default
    return out

"""Offline validation of a MultiGPUJob: the checks the API server makes, without one.

`mgj render` and other offline tools use it so that a spec the API server would reject
fails before anything is applied. It walks the CRD's own schema (api/schema.py) for
types, enums, bounds, patterns and required fields, applies the schema's defaults, then
checks the cross-field rules with their Python twins (api/rules.py). Rule messages are
the CEL messages, word for word; schema messages follow the API server's wording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from multigpu_operator.api.rules import NAME_RULES, SPEC_RULES
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.schema_types import Schema

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "number": (int, float),
}


def validate(spec: Mapping[str, Any], name: str | None = None) -> list[str]:
    """Every reason the API server would reject `spec` (and `name`, when given); [] if none.

    Cross-field rules run only on a spec whose fields have the right types, as their
    Python twins assume them; fix the schema errors first and they are checked too.
    """
    schema = spec_schema()
    errors = schema_errors(schema, spec, "spec")
    if not errors:
        defaulted = with_defaults(schema, spec)
        errors += [rule.message for rule in SPEC_RULES if not rule.holds(defaulted)]
    if name is not None:
        obj = {"metadata": {"name": name}}
        errors += [rule.message for rule in NAME_RULES if not rule.holds(obj)]
    return errors


def validate_object(obj: Mapping[str, Any]) -> list[str]:
    """`validate` for a whole MultiGPUJob manifest (metadata.name and spec)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return ["spec: Required value"]
    name = (obj.get("metadata") or {}).get("name")
    return validate(spec, name if isinstance(name, str) else None)


def with_defaults(schema: Schema, value: Any) -> Any:
    """`value` with the schema's defaults filled in, as the API server stores it.

    A null in a non-nullable field counts as absent (the server prunes it, then defaults).
    """
    if isinstance(value, Mapping):
        props: Mapping[str, Schema] = schema.get("properties", {})
        extra: Schema | None = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key) or extra
            if item is None and not (sub or {}).get("nullable"):
                continue
            out[key] = with_defaults(sub, item) if sub else item
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = with_defaults(sub, sub["default"])
        return out
    if isinstance(value, list) and "items" in schema:
        return [with_defaults(schema["items"], item) for item in value]
    return value


def schema_errors(schema: Schema, value: Any, path: str) -> list[str]:
    """Structural errors of `value` against an OpenAPI v3 (structural) schema."""
    if value is None:
        return []  # nullable, or pruned by the server; required fields are checked by the parent
    expected = schema.get("type")
    if expected and not _is_type(value, expected):
        got = _json_type(value)
        return [
            f'{path}: Invalid value: "{got}": {path} in body must be of type {expected}: "{got}"'
        ]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(json.dumps(v) for v in schema["enum"])
        errors.append(f"{path}: Unsupported value: {_show(value)}: supported values: {supported}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(
            f"{path}: Invalid value: {_show(value)}: {path} in body should be greater than or "
            f"equal to {schema['minimum']}"
        )
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(
            f"{path}: Invalid value: {_show(value)}: {path} in body should be less than or "
            f"equal to {schema['maximum']}"
        )
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(
            f"{path}: Invalid value: {_show(value)}: {path} in body should be at least "
            f"{schema['minLength']} chars long"
        )
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        errors.append(
            f"{path}: Invalid value: {_show(value)}: {path} in body should match "
            f"'{schema['pattern']}'"
        )
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(
            f"{path}: Invalid value: {len(value)}: {path} in body should have at least "
            f"{schema['minItems']} items"
        )
    if isinstance(value, Mapping):
        errors += _object_errors(schema, value, path)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(schema["items"], item, f"{path}[{i}]")
    return errors


def _object_errors(schema: Schema, value: Mapping[str, Any], path: str) -> list[str]:
    props: Mapping[str, Schema] = schema.get("properties", {})
    extra: Schema | None = schema.get("additionalProperties")
    errors = [
        f"{path}.{key}: Required value"
        for key in schema.get("required", [])
        if value.get(key) is None and "default" not in props.get(key, {})
    ]
    for key, item in value.items():
        sub = props.get(key) or extra
        if sub is not None:
            errors += schema_errors(sub, item, f"{path}.{key}")
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            # What kubectl's strict field validation (its default) reports; it catches
            # misspelt fields, which the server would otherwise drop silently.
            errors.append(f'unknown field "{path}.{key}"')
    return errors


def _is_type(value: Any, expected: str) -> bool:
    if isinstance(value, bool) and expected != "boolean":
        return False  # bool is an int in Python, not in JSON
    return isinstance(value, _TYPES.get(expected, (object,)))


def _json_type(value: Any) -> str:
    for name, types in (
        ("boolean", (bool,)),
        ("integer", (int,)),
        ("number", (float,)),
        ("string", (str,)),
        ("array", (list,)),
        ("object", (Mapping,)),
    ):
        if isinstance(value, types):
            return name
    return type(value).__name__


def _show(value: Any) -> str:
    return json.dumps(value)

"""The API server's checks of a custom resource's schema, in its own words.

kube-apiserver does not validate custom resources with a JSON Schema library but with
kube-openapi (k8s.io/kube-openapi/pkg/validation), and it differs from JSON Schema in
ways a user sees, so offline validation (api/validation.py) runs these keywords instead
of the library's own:
- a JSON number is a Go int64, or a float64 when written with a fraction or exponent or
  beyond int64. An integer field takes a float64 with an integral value (`2.0`, `1e6`);
  a wrong type is named by the field's format (`must be of type int32: "float64"`);
  a value outside the format's range gets its own line ("Checked value ...");
- every check of a field runs even when its type is wrong (`mode: 5` is both the wrong
  type and an unsupported value), and bounds compare the number whatever its type;
- a set (`x-kubernetes-list-type: set`) refuses duplicates, by Go's equality (1 and 1.0
  differ);
- the scale subresource reads spec.replicas as an int64 and adds its own lines.
Values are printed as Go prints them (api/go_values.py), so each line is the server's.
Each error carries its kind (`validator`); `line()` words it as the server does. Kinds in
`BLOCKING` stop the CEL rules, as on the server.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from jsonschema import ValidationError
from jsonschema.protocols import Validator

from multigpu_operator.api.go_values import (
    INT64,
    field_value,
    go_json,
    go_kind,
    go_value,
)
from multigpu_operator.api.openapi import Schema

_UNKNOWN_FIELD = "unknownField"
_RANGE = "formatRange"
_DUPLICATE = "x-kubernetes-list-type"  # its only check: a set's duplicates
# The API server's wording of each kind of error (k8s.io/apimachinery field.Error).
SERVER_WORDING = {
    "type": '{path}: Invalid value: "{got}": {path} in body must be of type {want}: "{got}"',
    _RANGE: '<nil>: Invalid value: "": Checked value must be of type integer with format {want} '
    "in {path}",
    "enum": "{path}: Unsupported value: {value}: supported values: {supported}",
    "minimum": (
        "{path}: Invalid value: {value}: {path} in body should be greater than or equal to {want}"
    ),
    "maximum": (
        "{path}: Invalid value: {value}: {path} in body should be less than or equal to {want}"
    ),
    "minLength": (
        "{path}: Invalid value: {value}: {path} in body should be at least {want} chars long"
    ),
    "pattern": "{path}: Invalid value: {value}: {path} in body should match '{want}'",
    "minItems": "{path}: Invalid value: {count}: {path} in body should have at least {want} items",
    "required": "{path}: Required value",
    _DUPLICATE: "{path}: Duplicate value: {value}",
    _UNKNOWN_FIELD: 'unknown field "{path}"',
}
# Errors after which the API server does not evaluate the CEL rules (apiextensions'
# hasBlockingErr: a wrong type, a missing field, an unsupported value).
BLOCKING = frozenset({"type", "required", "enum"})
RULES_NOT_CHECKED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": INT64}
# The largest integer a float64 holds exactly, as go-openapi's IsFloat64AJSONInteger.
_MAX_JSON_FLOAT_INT = 2**53 - 1

# --- the keywords ---------------------------------------------------------------------


def _error(kind: str, **params: Any) -> ValidationError:
    return ValidationError(kind, validator=kind, validator_value=params)


_SCHEMA_TYPE = {"bool": "boolean", "int64": "integer", "float64": "number"}
_SCHEMA_TYPE |= {"string": "string", "slice": "array", "map": "object"}
_DATA_FORMAT = {"int64": "int64", "float64": "float64"}


def type_(
    validator: Validator, want: str, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """kube-openapi's type check, then the integer format's range."""
    fmt = schema.get("format", "")
    kind = go_kind(instance)
    if kind == "nil":
        if not schema.get("nullable"):
            yield _error("type", want=want, got="null")
        return
    got, got_format = _SCHEMA_TYPE[kind], _DATA_FORMAT.get(kind, "")
    float_int = got == "number" and want == "integer" and _is_json_integer(instance)
    same = want == got or float_int or (got == "integer" and want == "number")
    if kind not in ("string", "slice") and fmt and not (same or got_format == fmt):
        yield _error("type", want=fmt, got=got_format)
    elif not same and not (kind == "string" and fmt and want not in ("integer", "number")):
        yield _error("type", want=want, got=got)
    if want == "integer" and kind in ("int64", "float64") and not _in_range(instance, fmt):
        yield _error(_RANGE, want=fmt or "int64")


def _is_json_integer(value: Any) -> bool:
    number = float(value)
    return math.isfinite(number) and number.is_integer() and abs(number) <= _MAX_JSON_FLOAT_INT


def _in_range(value: Any, fmt: str) -> bool:
    """Whether the number, written out in full, parses as an integer of the format."""
    low, high = _INT_RANGES.get(fmt, INT64)
    if go_kind(value) == "float64":
        number = float(value)
        return math.isfinite(number) and number.is_integer() and low <= int(number) <= high
    return bool(low <= value <= high)


def minimum(
    validator: Validator, bound: float, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if go_kind(instance) in ("int64", "float64") and instance < bound:
        yield _error("minimum", want=_bound(bound, instance))


def maximum(
    validator: Validator, bound: float, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if go_kind(instance) in ("int64", "float64") and instance > bound:
        yield _error("maximum", want=_bound(bound, instance))


def _bound(bound: float, instance: Any) -> str:
    """The bound as the server prints it: as a float64 (`%v`) when compared with one."""
    if go_kind(instance) == "float64" or not float(bound).is_integer():
        return go_value(float(bound))
    return str(int(bound))


def enum(
    validator: Validator, values: list[Any], instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if not any(go_kind(v) == go_kind(instance) and v == instance for v in values):
        yield _error("enum", want=", ".join(field_value(v) for v in values))


def min_length(
    validator: Validator, least: int, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if isinstance(instance, str) and len(instance) < least:
        yield _error("minLength", want=least)


def pattern(
    validator: Validator, regex: str, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    # Go's `$` matches only at the very end; Python's also before a final newline.
    if isinstance(instance, str) and not re.search(_go_regex(regex), instance):
        yield _error("pattern", want=regex)


def _go_regex(regex: str) -> str:
    return regex[:-1] + r"\Z" if regex.endswith("$") and not regex.endswith(r"\$") else regex


def min_items(
    validator: Validator, least: int, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if isinstance(instance, list) and len(instance) < least:
        yield _error("minItems", want=least)


def required(
    validator: Validator, fields: list[str], instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """`required`, with the missing field in the error's path (the server names it)."""
    if isinstance(instance, dict):
        for key in fields:
            if key not in instance:
                yield ValidationError("required", validator="required", path=[key])


def list_type(
    validator: Validator, kind: str, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """A set's duplicates, each once, at its second occurrence (Go's equality: scalars
    by type and value, objects and lists by their JSON)."""
    if kind != "set" or not isinstance(instance, list):
        return
    seen: dict[Any, int] = {}
    for index, item in enumerate(instance):
        key = go_json(item) if isinstance(item, (list, dict)) else (go_kind(item), item)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            yield ValidationError(_DUPLICATE, validator=_DUPLICATE, path=[index], instance=item)


# The keywords above, by the schema keyword they check. The schema's other keywords are
# checked inside these (format and nullable by `type`), walked by the validation library
# (properties, items, additionalProperties), or no check (default, description).
KEYWORDS = {
    "type": type_,
    "enum": enum,
    "minimum": minimum,
    "maximum": maximum,
    "minLength": min_length,
    "pattern": pattern,
    "minItems": min_items,
    "required": required,
    "x-kubernetes-list-type": list_type,
}


# --- the server's lines ---------------------------------------------------------------


def line(error: ValidationError) -> str:
    """The API server's line for an error of the keywords above."""
    field = field_path(error.absolute_path)
    params = error.validator_value if isinstance(error.validator_value, dict) else {}
    value = error.instance
    return SERVER_WORDING[str(error.validator)].format(
        path=field,
        value=field_value(value),
        count=len(value) if isinstance(value, list) else "",
        **{"want": "", "got": "", "supported": params.get("want", "")} | params,
    )


def unknown_field_line(path: str) -> str:
    return SERVER_WORDING[_UNKNOWN_FIELD].format(path=path)


def field_path(parts: Any) -> str:
    """A field's path as the API server writes it: `spec.containers[0].name`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out

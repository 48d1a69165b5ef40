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
Values are printed as Go prints them (`%v`, `%q`, JSON), so each line is the server's.
Each error carries its kind (`validator`); `line()` words it as the server does. Kinds in
`BLOCKING` stop the CEL rules, as on the server.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import ValidationError
from jsonschema.protocols import Validator

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

_INT64 = (-(2**63), 2**63 - 1)
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": _INT64}
# The largest integer a float64 holds exactly, as go-openapi's IsFloat64AJSONInteger.
_MAX_JSON_FLOAT_INT = 2**53 - 1
_GO_TYPES = {
    "bool": "bool",
    "int64": "int64",
    "float64": "float64",
    "string": "string",
    "slice": "[]interface {}",
    "map": "map[string]interface {}",
}


# --- JSON values as Go holds them -----------------------------------------------------


def go_kind(value: Any) -> str:
    """The Go type a JSON value decodes to: nil, bool, int64, float64, string, slice, map."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64" if _INT64[0] <= value <= _INT64[1] else "float64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "slice" if isinstance(value, list) else "map"


def go_type_name(value: Any) -> str:
    """`%T` of the decoded value."""
    return _GO_TYPES.get(go_kind(value), "<nil>")


def go_value(value: Any) -> str:
    """`%v` of the decoded value."""
    kind = go_kind(value)
    if kind == "nil":
        return "<nil>"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float64":
        return _go_float(float(value))
    if kind == "slice":
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if kind == "map":
        return "map[" + " ".join(f"{k}:{go_value(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def field_value(value: Any) -> str:
    """A value as a field error shows it: strings quoted, numbers and booleans as `%v`,
    anything else as JSON."""
    kind = go_kind(value)
    if kind == "nil":
        return "null"
    if kind == "string":
        return _go_quote(value)
    if kind in ("bool", "int64", "float64"):
        return go_value(value)
    return go_json(value)


def go_json(value: Any) -> str:
    """Go's json.Marshal: compact, keys sorted, <, > and & escaped."""
    kind = go_kind(value)
    if kind == "float64":
        return _go_json_float(float(value))
    if kind == "slice":
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if kind == "map":
        return "{" + ",".join(f"{go_json(k)}:{go_json(value[k])}" for k in sorted(value)) + "}"
    if kind == "string":
        text = json.dumps(value, ensure_ascii=False)
        for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(char, escaped)
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return json.dumps(value)


def stored_number(value: int | float) -> int | float:
    """A number as it reads back once the API server stored it: Go writes a float64 with
    an integral value below 1e21 as an integer of its shortest digits (2.0 -> 2,
    2**64 -> 18446744073709552000)."""
    if go_kind(value) != "float64":
        return value
    number = float(value)
    if math.isfinite(number) and number.is_integer() and abs(number) < 1e21:
        return int(_go_json_float(number))
    return number


def _go_float(number: float) -> str:
    """`%v` of a float64: the shortest digits, in exponent form below 1e-4 or from 1e6."""
    if not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("+Inf" if number > 0 else "-Inf")
    digits, point = _shortest_digits(number)
    exponent = point - 1
    sign = "-" if math.copysign(1, number) < 0 else ""
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return sign + _plain_digits(digits, point)


def _go_json_float(number: float) -> str:
    """encoding/json's float64: plain from 1e-6 up to 1e21, else exponent form."""
    digits, point = _shortest_digits(number)
    sign = "-" if math.copysign(1, number) < 0 else ""
    magnitude = abs(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        exponent = point - 1
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent)}"
    return sign + _plain_digits(digits, point)


def _shortest_digits(number: float) -> tuple[str, int]:
    """The shortest digits that read back as `number`, and where the decimal point goes."""
    if number == 0:
        return "0", 1
    mantissa, _, exponent = f"{abs(number)!r}".partition("e")
    whole, _, fraction = mantissa.partition(".")
    fraction = "" if fraction == "0" else fraction
    digits = (whole + fraction).lstrip("0")
    point = len(whole) + int(exponent or 0) - (len(whole + fraction) - len(digits))
    return digits.rstrip("0") or "0", point


def _plain_digits(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return f"{digits[:point]}.{digits[point:]}"


def _go_quote(text: str) -> str:
    """`%q`: Go's double-quoted string, printable characters as they are."""
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f"}
    escapes |= {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(f"\\u{ord(char):04x}" if ord(char) < 0x10000 else f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


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
    low, high = _INT_RANGES.get(fmt, _INT64)
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


def unknown_fields(schema: Schema | None, value: Any, at: tuple[Any, ...] = ()) -> Iterator[str]:
    """Fields the schema does not know, as paths: what kubectl's strict field validation
    refuses. As the API server's pruning, whatever the value's type: an object is checked
    against the schema's fields, a list's items against its items' schema, and in a value
    without a schema every field is unknown."""
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"):
        yield from _declared_fields(schema, value, at)
    elif isinstance(value, dict):
        properties = (schema or {}).get("properties", {})
        values = (schema or {}).get("additionalProperties")
        for key, sub in value.items():
            if schema is not None and key in properties:
                yield from unknown_fields(properties[key], sub, (*at, key))
            elif isinstance(values, dict):
                yield from unknown_fields(values, sub, (*at, key))
            else:
                yield field_path((*at, key))
    elif isinstance(value, list):
        items = (schema or {}).get("items") if schema is not None else None
        for index, item in enumerate(value):
            yield from unknown_fields(items, item, (*at, index))


def _declared_fields(schema: Schema | None, value: Any, at: tuple[Any, ...]) -> Iterator[str]:
    """In an object that keeps unknown fields, the declared ones are still checked."""
    if schema is None:
        return
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        values = schema.get("additionalProperties")
        for key, sub in value.items():
            if key in properties:
                yield from unknown_fields(properties[key], sub, (*at, key))
            elif isinstance(values, dict):
                yield from unknown_fields(values, sub, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _declared_fields(schema.get("items"), item, (*at, index))


def scale_errors(spec: Any) -> list[str]:
    """What the scale subresource says of spec.replicas (an int64, 0..MaxInt32)."""
    if not isinstance(spec, Mapping) or "replicas" not in spec:
        return []
    replicas, path = spec["replicas"], ".spec.replicas"
    if go_kind(replicas) != "int64":
        return [
            f"{path}: Invalid value: 0: {path} accessor error: {go_value(replicas)} is of the "
            f"type {go_type_name(replicas)}, expected int64"
        ]
    if replicas < 0:
        return [f"{path}: Invalid value: {replicas}: should be a non-negative integer"]
    if replicas > 2**31 - 1:
        return [f"{path}: Invalid value: {replicas}: should be less than or equal to {2**31 - 1}"]
    return []


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

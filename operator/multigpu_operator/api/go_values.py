"""JSON values as the API server's Go code holds and prints them.

The API server decodes a JSON number into an int64, or into a float64 when it is written
with a fraction or an exponent or does not fit an int64, and its messages print values
with Go's formatting (`%v`, `%q`, encoding/json). Offline validation (api/server_checks.py)
uses these to say exactly what the server says, and `stored_number` to read a number back
as the server stores it.
"""

from __future__ import annotations

import json
import math
from typing import Any

INT64 = (-(2**63), 2**63 - 1)
_GO_TYPES = {
    "bool": "bool",
    "int64": "int64",
    "float64": "float64",
    "string": "string",
    "slice": "[]interface {}",
    "map": "map[string]interface {}",
}


def go_kind(value: Any) -> str:
    """The Go type a JSON value decodes to: nil, bool, int64, float64, string, slice, map."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64" if INT64[0] <= value <= INT64[1] else "float64"
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

"""CEL as the API server evaluates it, for offline validation (api/validation.py): the
rules' expressions run by cel-python, values typed as the server's CEL sees them, and
the server's words for evaluation errors."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from multigpu_operator.api import go_values
from multigpu_operator.api.openapi import Schema

_ENV = celpy.Environment()
# The API server's words for evaluation errors.
_INVALID_DATA = "invalid data, expected int, got float64"
_OVERFLOW = "integer overflow"


def message(rule: Mapping[str, str], activation: dict[str, Any]) -> str:
    """The rule's messageExpression, or its message where that gives nothing usable."""
    expression = rule.get("messageExpression")
    if expression:
        text = evaluate(expression, activation)
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return str(text)
    return rule["message"]


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    try:
        return _program(expression).evaluate(activation)
    except CELEvalError as error:
        return error


def error_text(error: CELEvalError) -> str:
    """The API server's words for an evaluation error. cel-python wraps an error met by
    an operator (`a && b` of two errors) in its own, so the cause is looked for inside."""
    found = repr(error.args)
    if _INVALID_DATA in found:
        return _INVALID_DATA
    if "overflow" in found:
        return _OVERFLOW
    return str(error.args[0]) if error.args else "error"


def _format(template: celtypes.StringType, args: celtypes.ListType) -> Any:
    """The strings library's `'...'.format([...])`, for the verbs our messages use: %d (an
    integer), %s (a string or an integer) and %%."""
    pieces = re.split(r"(%.)", str(template))
    values = iter(args)
    out = []
    for piece in pieces:
        if piece == "%%":
            out.append("%")
        elif piece in ("%d", "%s"):
            value = next(values, None)
            if not isinstance(value, (celtypes.IntType, celtypes.StringType)) or (
                piece == "%d" and not isinstance(value, celtypes.IntType)
            ):
                return CELEvalError(f"format: {piece} of {type(value).__name__}")
            out.append(str(value))
        elif piece.startswith("%") and len(piece) == 2:
            return CELEvalError(f"format: {piece} is not supported offline")
        else:
            out.append(piece)
    return celtypes.StringType("".join(out))


@functools.cache
def _program(rule: str) -> celpy.Runner:
    """A rule compiled once per process (compiling costs far more than evaluating)."""
    return _ENV.program(_ENV.compile(rule), functions={"format": _format})


def cel_value(value: Any, schema: Schema | None) -> Any:
    """A JSON value as the API server's CEL sees it, by its schema: an integer field
    holding a float (2.0 passes the schema) is an error when a rule reads it."""
    schema = schema or {}
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        values = schema.get("additionalProperties")
        return celtypes.MapType(
            {
                celtypes.StringType(k): cel_value(
                    v, properties.get(k, values if isinstance(values, dict) else None)
                )
                for k, v in value.items()
            }
        )
    if isinstance(value, list):
        return celtypes.ListType([cel_value(v, schema.get("items")) for v in value])
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if value is None:
        return None
    if go_values.go_kind(value) == "int64":
        return celtypes.IntType(value)
    if schema.get("type") == "integer":
        return CELEvalError(_INVALID_DATA)
    return celtypes.DoubleType(float(value))

"""The CRD's CEL rules (api/rules.py) evaluated by cel-python, for offline validation
(api/validation.py): each rule compiled once, and its message, or its messageExpression
where that gives a line of text."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

_ENV = celpy.Environment()
_INT64 = range(-(2**63), 2**63)


def activation(value: Any) -> dict[str, Any]:
    """The variables a rule on `value` sees: `self`, as CEL values."""
    return {"self": _cel(value)}


def _cel(value: Any) -> Any:
    """A JSON value as CEL's: an integer beyond int64 is a double, as the API server
    decodes it."""
    if isinstance(value, dict):
        return celtypes.MapType({celtypes.StringType(k): _cel(v) for k, v in value.items()})
    if isinstance(value, list):
        return celtypes.ListType([_cel(v) for v in value])
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, int) and value in _INT64:
        return celtypes.IntType(value)
    if isinstance(value, (int, float)):
        return celtypes.DoubleType(float(value))
    return None


def evaluate(expression: str, variables: dict[str, Any]) -> Any:
    """The expression's value, or the CELEvalError it ended with."""
    try:
        return _program(expression).evaluate(variables)
    except CELEvalError as error:
        return error
    except (ValueError, TypeError) as error:  # an int64 overflow, say
        return CELEvalError(str(error))


def message(rule: Mapping[str, str], variables: dict[str, Any]) -> str:
    """The rule's messageExpression, or its message where that gives nothing usable."""
    expression = rule.get("messageExpression")
    if expression:
        text = evaluate(expression, variables)
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return str(text)
    return rule["message"]


def _format(template: celtypes.StringType, args: celtypes.ListType) -> Any:
    """The strings library's `'...'.format([...])`, for the verbs our messages use: %d,
    %s and %%."""
    values = iter(args)
    out = []
    for piece in re.split(r"(%.)", str(template)):
        if piece == "%%":
            out.append("%")
        elif piece in ("%d", "%s"):
            out.append(str(next(values, "")))
        elif piece.startswith("%") and len(piece) == 2:
            return CELEvalError(f"format: {piece} is not supported offline")
        else:
            out.append(piece)
    return celtypes.StringType("".join(out))


@functools.cache
def _program(rule: str) -> celpy.Runner:
    """A rule compiled once per process (compiling costs far more than evaluating)."""
    return _ENV.program(_ENV.compile(rule), functions={"format": _format})

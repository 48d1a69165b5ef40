"""Offline validation of a MultiGPUJob manifest against the CRD generated from api/, for
`mgj render` and `mgj run --local`: what is wrong with a job before it is applied.

At run time the API server is the validator: it checks every job it stores against the
CRD, and the operator only parses what it reads (reconcile.plan_object). Here libraries
do the same checks without a server:
- openapi-schema-validator checks the generated schema (OpenAPI 3.0), with two of
  Kubernetes' extensions written as JSON Schema: a field the schema does not declare is
  an error (kubectl's strict field validation), and a `set` list has unique items;
- defaults are filled in first, as the API server stores them (a null in a
  non-nullable field counts as absent): the CEL rules read the defaulted values;
- cel-python evaluates the CRD's own CEL rules (api/rules.py) with their messages,
  unless a field is unknown, missing, of the wrong type or not one of its values (the
  API server then skips them too). Transition rules compare with a stored object: they
  are for updates, not checked here.
Each problem names its field and says what is wrong, in the libraries' words and the
rules' messages; `mgj render --server` asks a real API server (a dry run) for its own.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from celpy.evaluation import CELEvalError
from jsonschema import ValidationError, validators
from jsonschema.protocols import Validator
from openapi_schema_validator import OAS30Validator

from multigpu_operator.api import cel
from multigpu_operator.api.openapi import Schema
from multigpu_operator.api.problem import Problem
from multigpu_operator.api.schema import root_schema

__all__ = ["Problem", "validate", "validate_object", "with_defaults"]

# Schema errors after which the CEL rules are not evaluated (they would read a field
# that is not there, or not what the schema says).
_BLOCKING = frozenset({"type", "required", "enum", "additionalProperties"})
# The scale subresource (kubectl scale, autoscalers) reads spec.replicas as an int64.
_SCALE_REPLICAS = "must be written as an integer: the scale subresource reads it as one"


def validate(spec: Mapping[str, Any], name: str | None = None) -> list[Problem]:
    """What is wrong with a job of `spec` (and `name`, when given); [] if nothing."""
    job: dict[str, Any] = {"spec": _plain(spec)}
    if name is not None:
        job["metadata"] = {"name": name}
    schema = _schemas()
    # Numbers as written: a rule that reads an integer field given as 2.0 fails on the
    # API server too.
    job = _defaulted(schema.root, job, stored=False)
    found = list(schema.checker.iter_errors(job))
    problems = _name_problems(name) if name is not None else []
    problems += [p for e in found for p in _problems(e)]
    if isinstance(job["spec"].get("replicas"), float):
        problems.append(Problem("spec.replicas", _SCALE_REPLICAS))
    if not any(e.validator in _BLOCKING for e in found):
        root = schema.root if name is not None else schema.root["properties"]["spec"]
        value, at = (job, ()) if name is not None else (job["spec"], ("spec",))
        problems += _rule_problems(root, value, at)
    return problems


def validate_object(obj: Mapping[str, Any]) -> list[Problem]:
    """`validate` for a whole MultiGPUJob manifest (its metadata.name and spec)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [Problem("spec", "a MultiGPUJob needs a spec")]
    name = (obj.get("metadata") or {}).get("name")
    return validate(spec, name if isinstance(name, str) else None)


def with_defaults(schema: Schema, value: Any) -> Any:
    """`value` with the schema's defaults filled in, top down, as the API server stores
    it: a null in a non-nullable field or map value is dropped first, and a number with
    an integral value reads back as an integer (2.0 is 2)."""
    return _defaulted(schema, value, stored=True)


def _defaulted(schema: Schema | None, value: Any, stored: bool) -> Any:
    """`value` defaulted by `schema`; a value the schema does not declare (`schema` None)
    is kept as it is, nulls included, its numbers as stored."""
    if isinstance(value, dict):
        properties = (schema or {}).get("properties", {})
        values = (schema or {}).get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = properties.get(key, values if isinstance(values, dict) else None)
            if item is not None or sub is None or sub.get("nullable"):
                out[key] = _defaulted(sub, item, stored)
        for key, sub in properties.items():
            if key not in out and "default" in sub:
                out[key] = _defaulted(sub, copy.deepcopy(sub["default"]), stored)
        return out
    if isinstance(value, list):
        items = (schema or {}).get("items")
        return [_defaulted(items if isinstance(items, dict) else None, v, stored) for v in value]
    if stored and isinstance(value, (int, float)) and not isinstance(value, bool):
        return _stored_number(value)
    return value


def _stored_number(value: float) -> float:
    """A number as the API server writes it back: an int64 as it is, any other as a
    float64, whose shortest digits JSON shows without an exponent below 1e21 (2.0 reads
    back as 2, 2**64 as 18446744073709552000)."""
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    number = float(value)
    return int(Decimal(repr(number))) if number.is_integer() and abs(number) < 1e21 else number


# Any object's name is a DNS-1123 subdomain, checked by the API server before the CRD's
# own rules (which also ask for a DNS-1035 label, api/rules.py).
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _name_problems(name: str) -> list[Problem]:
    if not name:
        return [Problem("metadata.name", "required field is missing")]
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        return [Problem("metadata.name", "must be a lowercase DNS-1123 subdomain (RFC 1123)")]
    return []


# --- the schema, by the library --------------------------------------------------------


def _problems(error: ValidationError) -> Iterator[Problem]:
    """An error of the library as problems, each naming its field: a missing or an
    unknown field is named itself, not the object that lacks or has it."""
    field = _field_path(error.absolute_path)
    instance: Any = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        for key in error.validator_value:  # type: ignore[union-attr]
            if key not in instance:
                yield Problem(_join(field, key), "required field is missing")
    elif error.validator == "additionalProperties" and isinstance(instance, dict):
        schema: Any = error.schema
        for key in instance:
            if key not in schema.get("properties", {}):
                yield Problem(_join(field, key), "unknown field")
    else:
        yield Problem(field, error.message)


def _strict(schema: Schema) -> Schema:
    """The schema as JSON Schema checks Kubernetes' strict field validation and sets:
    objects that do not keep unknown fields refuse undeclared ones."""
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
        if "additionalProperties" not in out and not out.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key])
    if out.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    return out


def _is_integer(checker: Any, value: Any) -> bool:
    """A JSON number with an integral value (2.0 is an integer to the API server)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_Checker = validators.extend(  # type: ignore[no-untyped-call]
    OAS30Validator, type_checker=OAS30Validator.TYPE_CHECKER.redefine("integer", _is_integer)
)


# --- the CEL rules, by cel-python ------------------------------------------------------


def _rule_problems(schema: Schema, value: Any, at: tuple[Any, ...]) -> Iterator[Problem]:
    """Each rule of x-kubernetes-validations that `value` (at path `at`) and its fields
    fail, with the rule's message at its fieldPath."""
    rules = [r for r in schema.get("x-kubernetes-validations", []) if "oldSelf" not in r["rule"]]
    if rules:
        variables = cel.activation(value)
        for rule in rules:
            result = cel.evaluate(rule["rule"], variables)
            field = (_field_path(at) + rule.get("fieldPath", "")).lstrip(".")
            if isinstance(result, CELEvalError):
                yield Problem(field, f"rule failed to evaluate ({result}): {rule['message']}")
            elif not result:
                yield Problem(field, cel.message(rule, variables))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        values = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, values if isinstance(values, dict) else None)
            if sub is not None:
                yield from _rule_problems(sub, item, (*at, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _rule_problems(schema["items"], item, (*at, index))


# --- helpers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Schemas:
    root: Schema
    checker: Validator


@functools.cache
def _schemas() -> _Schemas:
    """The generated schema and its checker, built once per process."""
    root = root_schema()
    return _Schemas(root, _Checker(_strict(root)))


def _field_path(parts: Any) -> str:
    """A field's path as Kubernetes writes it: `spec.containers[0].name`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def _plain(value: Any) -> Any:
    """A deep copy as plain JSON data, which the libraries expect (YAML dates as text)."""
    return json.loads(
        json.dumps(value, default=lambda v: dict(v) if isinstance(v, Mapping) else str(v))
    )

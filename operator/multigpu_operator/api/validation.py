"""Offline validation and defaulting of a MultiGPUJob: the API server's checks, without one.

`mgj render` and the controller use it so that a spec the API server would reject fails
before anything is applied. Everything is read from the generated schema
(api/schema.py), as the API server reads the CRD:
- defaulting: nulls in non-nullable fields are dropped, then defaults filled in, top
  down (a defaulted object gets its own fields' defaults);
- the schema is checked by openapi-schema-validator (OpenAPI 3.0, which has `nullable`),
  with kubectl's strict field validation: a field the schema does not know is an error;
- the CEL rules (x-kubernetes-validations) are evaluated by cel-python on the defaulted
  object, only once the schema holds, as their guards assume the declared types.
The libraries' errors are put in the API server's words by one table, `SERVER_WORDING`, so
that `mgj render` and `kubectl apply` tell users the same thing.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError
from jsonschema import ValidationError, validators
from jsonschema.protocols import Validator
from openapi_schema_validator import OAS30Validator

from multigpu_operator.api.openapi import Schema
from multigpu_operator.api.schema import root_schema

_UNKNOWN_FIELD = "unknownField"
# The API server's wording of each kind of error (k8s.io/apimachinery field.Error).
SERVER_WORDING = {
    "type": '{path}: Invalid value: "{got}": {path} in body must be of type {want}: "{got}"',
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
    _UNKNOWN_FIELD: 'unknown field "{path}"',
}


def validate(spec: Mapping[str, Any], name: str | None = None) -> list[str]:
    """Every reason the API server would reject `spec` (and `name`, when given); [] if none.

    Cross-field rules run only on a spec that the schema accepts; fix the schema errors
    first and they are checked too.
    """
    checks = _checks()
    job = _plain({"spec": spec})
    _run(checks.defaults.iter_errors(job))
    errors = _messages(checks.schema.iter_errors(job))
    if not errors:
        errors += [e.message for e in checks.spec_rules.iter_errors(job["spec"])]
    if name is not None:
        obj = {"metadata": {"name": name}, **job}
        errors += [e.message for e in checks.root_rules.iter_errors(obj)]
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
    out = _plain(value)
    _run(_Defaulter(schema).iter_errors(out))
    return out


# --- the API server's behaviour, as keywords of the validation library ----------------

_OPENAPI = OAS30Validator.VALIDATORS
# The keywords that lead from an object to its fields, list items and map values.
_DESCEND = {k: _OPENAPI[k] for k in ("properties", "items", "additionalProperties")}


def _default_properties(
    validator: Validator, properties: Schema, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """`properties`, after pruning nulls and filling in defaults as the API server does."""
    if validator.is_type(instance, "object"):
        for key, sub in properties.items():
            if key in instance and instance[key] is None and not sub.get("nullable"):
                del instance[key]
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
    yield from _DESCEND["properties"](validator, properties, instance, schema)


def _properties_known(
    validator: Validator, properties: Schema, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """`properties`, and kubectl's strict field validation: fields the schema does not
    know are errors, unless it keeps unknown fields or is a map."""
    yield from _DESCEND["properties"](validator, properties, instance, schema)
    keeps_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or (
        "additionalProperties" in schema
    )
    if validator.is_type(instance, "object") and not keeps_unknown:
        for key in instance:
            if key not in properties:
                yield ValidationError("unknown field", validator=_UNKNOWN_FIELD, path=[key])


def _required(
    validator: Validator, required: list[str], instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """`required`, with the missing field in the error's path (the server names it)."""
    if validator.is_type(instance, "object"):
        for key in required:
            if key not in instance:
                yield ValidationError(f"{key!r} is a required property", path=[key])


def _cel_rules(
    validator: Validator, rules: list[dict[str, str]], instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """x-kubernetes-validations: each rule's CEL, with `self` the object it is on."""
    activation = {"self": json_to_cel(instance)}
    for rule in rules:
        if not _holds(rule["rule"], activation):
            yield ValidationError(rule["message"])


def _holds(rule: str, activation: dict[str, Any]) -> bool:
    try:
        result = _program(rule).evaluate(activation)
    except CELEvalError:
        return False  # the API server rejects an object its rule cannot evaluate
    return not isinstance(result, CELEvalError) and bool(result)


def _validator_class(keywords: Mapping[str, Any]) -> Any:
    """A validator class of the library, with OpenAPI 3.0's types, that runs `keywords`."""
    return validators.create(
        meta_schema=OAS30Validator.META_SCHEMA,
        validators=keywords,
        type_checker=OAS30Validator.TYPE_CHECKER,
        id_of=OAS30Validator.ID_OF,
    )


# Walks the schema, defaulting on the way.
_Defaulter = _validator_class({**_DESCEND, "properties": _default_properties})
# OpenAPI 3.0 validation with the API server's strict fields and required fields.
_SchemaChecker = _validator_class(
    {**_OPENAPI, "properties": _properties_known, "required": _required}
)
# Walks the schema, evaluating the CEL rules on the way.
_RuleChecker = _validator_class({**_DESCEND, "x-kubernetes-validations": _cel_rules})
_CEL = celpy.Environment()


@functools.cache
def _program(rule: str) -> celpy.Runner:
    """A rule compiled once per process (compiling costs far more than evaluating)."""
    return _CEL.program(_CEL.compile(rule))


class _Checks:
    """The generated schema's checkers, built once: validation runs per job generation."""

    def __init__(self, root: Schema) -> None:
        spec = root["properties"]["spec"]
        self.defaults: Validator = _Defaulter(root)
        self.schema: Validator = _SchemaChecker(root)
        self.spec_rules: Validator = _RuleChecker(spec)
        # The root object's own rules, not again those of its spec.
        self.root_rules: Validator = _RuleChecker(
            {k: v for k, v in root.items() if k != "properties"}
        )


@functools.cache
def _checks() -> _Checks:
    return _Checks(root_schema())


# --- from the library's errors to the API server's messages ---------------------------


def _messages(errors: Iterator[ValidationError]) -> list[str]:
    found = list(errors)
    # As on the API server, a value of the wrong type gets that one error only.
    mistyped = {tuple(e.absolute_path) for e in found if e.validator == "type"}
    lines = [
        _line(e) for e in found if e.validator == "type" or tuple(e.absolute_path) not in mistyped
    ]
    return list(dict.fromkeys(lines))


def _line(error: ValidationError) -> str:
    path = _path(error.absolute_path)
    wording = SERVER_WORDING.get(str(error.validator))
    value = error.instance
    if wording is None:  # a keyword without the server's wording: the library's message
        return f"{path}: Invalid value: {json.dumps(value)}: {error.message}"
    want = error.validator_value
    return wording.format(
        path=path,
        value=json.dumps(value),
        got=_json_type(value),
        want=want,
        supported=", ".join(json.dumps(v) for v in want) if isinstance(want, list) else "",
        count=len(value) if isinstance(value, list) else "",
    )


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _json_type(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    names |= {list: "array", dict: "object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _plain(value: Any) -> Any:
    """A deep copy as plain JSON data, which the libraries expect (YAML dates as text)."""
    return json.loads(
        json.dumps(value, default=lambda v: dict(v) if isinstance(v, Mapping) else str(v))
    )


def _run(errors: Iterator[ValidationError]) -> None:
    """Walk the whole schema (what defaulting needs); a walker reports no errors."""
    for _ in errors:
        pass

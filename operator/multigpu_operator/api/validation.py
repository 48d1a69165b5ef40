"""Offline validation and defaulting of a MultiGPUJob: the API server's checks, without one.

`mgj render` and the controller use it so that a spec the API server would reject fails
before anything is applied, with the very lines the server would answer. Everything is
read from the generated schema (api/schema.py), as the API server reads the CRD, in the
server's order:
- kubectl's strict field validation: a field the schema does not know is an error, and
  then the only one (the server refuses such a request before validating it);
- defaulting: nulls in non-nullable fields and map values are dropped, then defaults
  filled in, top down (a defaulted object gets its own fields' defaults);
- the schema, by jsonschema's walker with the API server's own keywords
  (api/server_checks.py: types as Go decodes JSON, formats, bounds, sets), and the scale
  subresource's check of spec.replicas;
- the CEL rules (x-kubernetes-validations), evaluated by cel-python on the defaulted
  object unless an error above blocks them (a wrong type, a missing field, an unsupported
  value), as the server does. Transition rules, which compare with a stored object, are
  for updates and not checked here.
`tests/integration/test_generated_specs.py` holds thousands of generated specs against a
real API server to keep every line the same.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from celpy.evaluation import CELEvalError
from jsonschema import ValidationError, validators
from jsonschema.protocols import Validator
from openapi_schema_validator import OAS30Validator

from multigpu_operator.api import cel, go_values, object_checks, server_checks
from multigpu_operator.api.openapi import Schema
from multigpu_operator.api.schema import root_schema
from multigpu_operator.api.server_checks import SERVER_WORDING

__all__ = ["SERVER_WORDING", "validate", "validate_object", "with_defaults"]


def validate(spec: Mapping[str, Any], name: str | None = None) -> list[str]:
    """Every line of the API server's answer to creating a job with `spec` (and `name`,
    when given); [] if it would be accepted."""
    checks = _checks()
    job = _plain({"spec": spec})
    unknown = sorted(object_checks.unknown_fields(checks.root, job))
    if unknown:
        return [server_checks.unknown_field_line(path) for path in unknown]
    _run(checks.defaults.iter_errors(job))
    found = list(checks.schema.iter_errors(job))
    errors = object_checks.name_errors(name) if name is not None else []
    errors += [server_checks.line(e) for e in found]
    errors += object_checks.scale_errors(job["spec"])
    if object_checks.NAME_REQUIRED in errors or any(
        e.validator in server_checks.BLOCKING for e in found
    ):
        return [*errors, server_checks.RULES_NOT_CHECKED]
    errors += [_rule_line(e, "spec") for e in checks.spec_rules.iter_errors(job["spec"])]
    if name is not None:
        obj = {"metadata": {"name": name}, **job}
        errors += [_rule_line(e, "") for e in checks.root_rules.iter_errors(obj)]
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

    A null in a non-nullable field counts as absent (the server prunes it, then defaults);
    numbers read back as the server writes them (2.0 is 2).
    """
    out = _plain(value)
    _run(_Defaulter(schema).iter_errors(out))
    return _as_stored(out)


# --- defaulting, as keywords of the validation library ---------------------------------

_OPENAPI = OAS30Validator.VALIDATORS
# The keywords that lead from an object to its fields, list items and map values.
_DESCEND = {k: _OPENAPI[k] for k in ("properties", "items", "additionalProperties")}


def _default_properties(
    validator: Validator, properties: Schema, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """`properties`, after pruning nulls and filling in defaults as the API server does."""
    if isinstance(instance, dict):
        for key, sub in properties.items():
            if key in instance and instance[key] is None and not sub.get("nullable"):
                del instance[key]
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
    yield from _DESCEND["properties"](validator, properties, instance, schema)


def _prune_null_values(
    validator: Validator, values: Any, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """`additionalProperties`, after pruning null map values as the API server does."""
    if isinstance(instance, dict) and isinstance(values, dict) and not values.get("nullable"):
        for key in [k for k, v in instance.items() if v is None]:
            del instance[key]
    yield from _DESCEND["additionalProperties"](validator, values, instance, schema)


def _as_stored(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _as_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_stored(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return go_values.stored_number(value)
    return value


def _validator_class(keywords: Mapping[str, Any]) -> Any:
    """A validator class of the library, with OpenAPI 3.0's types, that runs `keywords`."""
    return validators.create(
        meta_schema=OAS30Validator.META_SCHEMA,
        validators=keywords,
        type_checker=OAS30Validator.TYPE_CHECKER,
        id_of=OAS30Validator.ID_OF,
    )


# Walks the schema, defaulting on the way.
_Defaulter = _validator_class(
    {
        **_DESCEND,
        "properties": _default_properties,
        "additionalProperties": _prune_null_values,
    }
)
# The API server's schema checks.
_SchemaChecker = _validator_class({**_DESCEND, **server_checks.KEYWORDS})


def _cel_rules(
    validator: Validator, rules: list[dict[str, str]], instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    """x-kubernetes-validations: each rule's CEL, with `self` the object it is on; an
    error's message is the end of the server's line, its path the object's."""
    activation = {"self": cel.cel_value(instance, schema)}
    for rule in rules:
        if "oldSelf" in rule["rule"]:
            continue  # a transition rule: updates only
        result = cel.evaluate(rule["rule"], activation)
        if isinstance(result, CELEvalError):
            text = f"{cel.error_text(result)} evaluating rule: {rule['message']}"
            yield ValidationError(f'Invalid value: "object": {text}', validator_value="")
        elif not result:
            # Without a fieldPath the server names the object and its type.
            field = rule.get("fieldPath", "")
            value = "" if field else '"object": '
            message = f"Invalid value: {value}{cel.message(rule, activation)}"
            yield ValidationError(message, validator_value=field)


def _rule_line(error: ValidationError, root: str) -> str:
    """`<object path><fieldPath>: <message>`, the object's path below `root`."""
    path = ".".join(p for p in (root, server_checks.field_path(error.absolute_path)) if p)
    field = (path + str(error.validator_value)).lstrip(".")
    return f"{field}: {error.message}"


# Walks the schema, evaluating the CEL rules on the way.
_RuleChecker = _validator_class({**_DESCEND, "x-kubernetes-validations": _cel_rules})


class _Checks:
    """The generated schema's checkers, built once: validation runs per job generation."""

    def __init__(self, root: Schema) -> None:
        self.root = root
        self.defaults: Validator = _Defaulter(root)
        self.schema: Validator = _SchemaChecker(root)
        self.spec_rules: Validator = _RuleChecker(root["properties"]["spec"])
        # The root object's own rules, not again those of its spec.
        self.root_rules: Validator = _RuleChecker(
            {k: v for k, v in root.items() if k != "properties"}
        )


@functools.cache
def _checks() -> _Checks:
    return _Checks(root_schema())


# --- helpers ---------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A deep copy as plain JSON data, which the libraries expect (YAML dates as text)."""
    return json.loads(
        json.dumps(value, default=lambda v: dict(v) if isinstance(v, Mapping) else str(v))
    )


def _run(errors: Iterator[ValidationError]) -> None:
    """Walk the whole schema (what defaulting needs); a walker reports no errors."""
    for _ in errors:
        pass

"""From the typed declaration (pydantic models) to a CRD's structural OpenAPI v3 schema.

pydantic writes JSON Schema; a CRD takes the structural subset of OpenAPI v3 that
Kubernetes accepts. The generator here is pydantic's own, adjusted where Kubernetes
differs:
- no references: every object is written out where it is used;
- `X | None` means "may be omitted", not "may be null": the null alternative is dropped.
  A field that may be null says so with `Nullable` (OpenAPI's `nullable: true`);
- a default of None or of an empty list is Python's "unset" and not written: the API
  server stores no such value. Every other default is the server's, and the field's
  description ends with "Default X." (and a maximum with "At most X.") so that the text
  never disagrees with the value;
- a model's docstring is its description; no titles; whitespace in descriptions is
  collapsed, so docstrings can be wrapped;
- CEL rules (api/rules.py) are attached to the objects they are given for.
Keys are written in one fixed order so the CRD reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from multigpu_operator.api.rules import Rule

Schema = dict[str, Any]
Rules = Mapping[Any, Sequence[Rule]]  # model class -> its rules

_KEY_ORDER = (
    "type",
    "format",
    "nullable",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "minItems",
    "pattern",
    "default",
    "description",
    "required",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "properties",
    "additionalProperties",
    "items",
    "x-kubernetes-validations",
)
# Server defaults of these types are stated in the description ("Default 3.").
_DESCRIBED_DEFAULTS = ("integer", "number", "string")


def structural_schema(model: type[BaseModel], rules: Rules) -> Schema:
    """The structural schema of `model`, with `rules` attached to the models they name."""

    class Generator(_KubernetesSchema):
        def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
            out = super().model_schema(schema)
            validations = rules.get(schema["cls"])
            if validations:
                out["x-kubernetes-validations"] = [r.validation() for r in validations]
            return out

    raw = model.model_json_schema(by_alias=True, schema_generator=Generator)
    return _structural(raw, raw.get("$defs", {}))


class _KubernetesSchema(GenerateJsonSchema):
    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        return value  # as declared; _structural orders the schema's own keys

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        out = super().default_schema(schema)
        if out.get("default", 0) in (None, []):
            del out["default"]
        return out


def _structural(node: Schema, defs: Mapping[str, Schema]) -> Schema:
    """`node` with references written out, no titles, keys in order and defaults
    described."""
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    out: Schema = {}
    for key in sorted((k for k in node if k not in ("$defs", "title")), key=_rank):
        value = node[key]
        if key == "properties":
            value = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = _structural(value, defs)
        elif key == "description":
            value = " ".join(value.split())
        out[key] = value
    if "default" in out and out.get("type") in _DESCRIBED_DEFAULTS:
        out["description"] = f"{out.get('description', '')} Default {out['default']}.".lstrip()
    if "maximum" in out:
        out["description"] = f"{out.get('description', '')} At most {out['maximum']}.".lstrip()
    return out


def _rank(key: str) -> int:
    return _KEY_ORDER.index(key) if key in _KEY_ORDER else len(_KEY_ORDER)

"""The API server's checks of an object beyond its schema's keywords, in its own words:
strict field validation (fields the schema does not know), any object's name, and the
scale subresource's reading of spec.replicas. api/validation.py runs them before the
schema checks of api/server_checks.py, in the server's order."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from multigpu_operator.api.go_values import field_value, go_kind, go_type_name, go_value
from multigpu_operator.api.openapi import Schema
from multigpu_operator.api.server_checks import field_path


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


# Every object's name is a DNS-1123 subdomain (k8s.io/apimachinery's IsDNS1123Subdomain).
_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    f"used for validation is '{_DNS1123_SUBDOMAIN}')"
)
NAME_REQUIRED = "metadata.name: Required value: name or generateName is required"


def name_errors(name: str) -> list[str]:
    """What the API server says of any object's name, before our own name rules."""
    if not name:
        return [NAME_REQUIRED]
    shown = field_value(name)
    lines = []
    if len(name) > 253:
        lines.append(f"metadata.name: Invalid value: {shown}: must be no more than 253 characters")
    if not re.fullmatch(_DNS1123_SUBDOMAIN, name):
        lines.append(f"metadata.name: Invalid value: {shown}: {_DNS1123_SUBDOMAIN_MESSAGE}")
    return lines


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

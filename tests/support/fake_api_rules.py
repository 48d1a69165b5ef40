"""The API server's own rules that support/fake_cluster.py plays: a stale resourceVersion
is a Conflict, a JSON merge patch (RFC 7386) applies as the server applies it, and a list or
watch selects by namespace and a label selector."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from multigpu_operator.cluster.errors import Conflict
from multigpu_operator.cluster.kinds import Kind


def precondition(kind: Kind, current: Mapping[str, Any], resource_version: str | None) -> None:
    if resource_version is not None and resource_version != current["metadata"].get(
        "resourceVersion"
    ):
        raise Conflict(
            f'Operation cannot be fulfilled on {kind.plural} "{current["metadata"]["name"]}": '
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
            409,
        )


def apply_merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386): null removes a key, objects merge, the rest replaces."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = apply_merge_patch(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def matches(obj: Mapping[str, Any], selector: str | None, namespace: str | None) -> bool:
    """`namespace` (None: all) and a label selector of `key` / `key=value` terms."""
    meta = obj["metadata"]
    if namespace is not None and meta.get("namespace", namespace) != namespace:
        return False
    labels = meta.get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True

"""The API server's own rules that support/fake_cluster.py plays: a stale resourceVersion
is a Conflict, a JSON merge patch (RFC 7386) applies as the server applies it, a list or
watch selects by namespace, a label selector and a field selector, and a log is cut to
its last `tailLines`."""

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


def matches(
    obj: Mapping[str, Any],
    selector: str | None,
    namespace: str | None,
    fields: str | None = None,
) -> bool:
    """`namespace` (None: all), a label selector of `key`, `!key` and `key=value` terms and
    a field selector of `path.to.field=value` and `path.to.field!=value` terms."""
    meta = obj["metadata"]
    if namespace is not None and meta.get("namespace", namespace) != namespace:
        return False
    labels = meta.get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        if term.startswith("!"):
            if term[1:] in labels:
                return False
            continue
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    for term in filter(None, (fields or "").split(",")):
        path, _, value = term.partition("=")
        if path.endswith("!"):
            if str(_field(obj, path[:-1])) == value:
                return False
        elif str(_field(obj, path)) != value:
            return False
    return True


def as_watched(
    event: Mapping[str, Any],
    before: Mapping[str, Any] | None,
    selector: str | None,
    namespace: str | None,
    fields: str | None = None,
) -> Mapping[str, Any] | None:
    """The event as a watch with these selectors sends it (None: not at all), `before` being
    the object as the previous event left it: one that starts matching comes ADDED, one
    that stops matching DELETED, as the API server's watch cache sends them."""
    obj = event["object"]
    now = matches(obj, selector, namespace, fields)
    if event["type"] == "DELETED":
        return event if now else None
    was = before is not None and matches(before, selector, namespace, fields)
    if now and not was and event["type"] == "MODIFIED":
        return {"type": "ADDED", "object": obj}
    if was and not now:
        return {"type": "DELETED", "object": obj}
    return event if now else None


def _field(obj: Mapping[str, Any], path: str) -> Any:
    value: Any = obj
    for key in path.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return "" if value is None else value


def tail(lines: list[str], tail_lines: str | None) -> list[str]:
    """The last `tail_lines` lines (all without it)."""
    return list(lines) if tail_lines is None else lines[max(len(lines) - int(tail_lines), 0) :]

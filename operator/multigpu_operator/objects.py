"""Small facts about the objects the controller holds: whose a job or pod is, and which
of two versions of a job is newer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multigpu_operator.api.spec import OPERATOR_CONTROLLER


def managed_here(body: Mapping[str, Any]) -> bool:
    return (body.get("spec") or {}).get("managedBy") in (None, OPERATOR_CONTROLLER)


def owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    return any(ref["uid"] == uid for ref in pod["metadata"].get("ownerReferences", []))


def same_version(body: Mapping[str, Any], known: Mapping[str, Any]) -> bool:
    """Whether `body` is the very version of the object `known` is (same UID and
    resourceVersion): a status write's own watch event."""
    meta, known_meta = body["metadata"], known["metadata"]
    version = meta.get("resourceVersion")
    return (
        version is not None
        and meta.get("uid") == known_meta.get("uid")
        and version == known_meta.get("resourceVersion")
    )


def older(body: Mapping[str, Any], known: Mapping[str, Any]) -> bool:
    """Whether `body` is an older version of the same object than `known`.

    resourceVersions are opaque strings, but etcd-backed API servers hand out increasing
    integers; where either is not one, nothing is assumed (the conditional status write
    then catches a stale view).
    """
    if body["metadata"].get("uid") != known["metadata"].get("uid"):
        return False
    try:
        return int(body["metadata"]["resourceVersion"]) < int(known["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False

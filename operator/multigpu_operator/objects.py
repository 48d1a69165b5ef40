"""Small facts about the objects the controller holds: whose a job or pod is, and which
of two versions of a job is newer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multigpu_operator.api.managed_by import managed_by_us


def managed_here(body: Mapping[str, Any]) -> bool:
    """Whether this operator runs the stored job `body` (JobSpec.managed_here, read before
    the spec is parsed: a job that does not parse is still failed only if it is ours)."""
    return managed_by_us((body.get("spec") or {}).get("managedBy"))


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether the object (a pod, a Service) has an owner reference to the UID `uid`."""
    return any(ref["uid"] == uid for ref in obj["metadata"].get("ownerReferences", []))


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

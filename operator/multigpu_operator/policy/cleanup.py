"""What is left of a finished job: which pods the clean-pod policy deletes, and when the
job itself is deleted (ttlSecondsAfterFinished) (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from multigpu_operator.api.lifecycle import CleanPodPolicy

_FINISHED = ("Succeeded", "Failed")


def pods_to_clean(pods: Sequence[Mapping[str, Any]], policy: CleanPodPolicy) -> list[str]:
    """Names of the live pods `policy` deletes once the job has finished."""
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    if policy is CleanPodPolicy.NONE:
        return []
    if policy is CleanPodPolicy.RUNNING:
        live = [p for p in live if p.get("status", {}).get("phase") not in _FINISHED]
    return sorted(p["metadata"]["name"] for p in live)


def ttl_due(completion: datetime, ttl_seconds: int | None) -> datetime | None:
    """When a finished job is deleted; None if it is kept."""
    return None if ttl_seconds is None else completion + timedelta(seconds=ttl_seconds)

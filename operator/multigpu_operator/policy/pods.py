"""A job's pods as the operator labels them: the attempt that created each, its index."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multigpu_operator.api import names


def attempt_of(pod: Mapping[str, Any]) -> int:
    raw = pod["metadata"].get("labels", {}).get(names.LABEL_ATTEMPT, "1")
    return int(raw) if str(raw).isdigit() else 1


def with_attempt(pod: Mapping[str, Any], attempt: int) -> dict[str, Any]:
    meta = pod["metadata"]
    labels = {**meta.get("labels", {}), names.LABEL_ATTEMPT: str(attempt)}
    return {**pod, "metadata": {**meta, "labels": labels}}


def replica_index(pod: Mapping[str, Any]) -> int:
    raw = pod["metadata"].get("labels", {}).get(names.LABEL_REPLICA_INDEX, "-1")
    return int(raw) if str(raw).isdigit() else -1

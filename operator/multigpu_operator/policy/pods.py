"""A job's pods as the operator labels and counts them: the attempt that created each,
its replica index, how many are in each phase (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


def being_deleted(pod: Mapping[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def name_of(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["name"])


@dataclass(frozen=True)
class PodCounts:
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.pending + self.running + self.succeeded + self.failed

    def as_status(self) -> dict[str, int]:
        return {
            "pending": self.pending,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }


def count_pods(pods: Sequence[Mapping[str, Any]]) -> PodCounts:
    """Pods being deleted are not counted: they are on their way out."""
    phases = [p.get("status", {}).get("phase", "Pending") for p in pods if not being_deleted(p)]
    return PodCounts(
        pending=sum(ph not in ("Running", "Succeeded", "Failed") for ph in phases),
        running=phases.count("Running"),
        succeeded=phases.count("Succeeded"),
        failed=phases.count("Failed"),
    )

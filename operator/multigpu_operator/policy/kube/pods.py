"""A job's pods as the operator counts them: how many are in each phase, which are being
deleted (pure). Their labels (attempt, replica index) are read by api/pod_labels.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def being_deleted(pod: Mapping[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def name_of(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["name"])


@dataclass(frozen=True)
class ObservedPodCounts:
    """The job's pods by phase as observed in one pass; the status field they fill is
    api/status.py `PodCounts`."""

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


def waiting_containers(pod: Mapping[str, Any]) -> list[tuple[bool, Mapping[str, Any]]]:
    """(is an init container, its status) of every container of `pod` that waits: not
    started yet, or restarting (CrashLoopBackOff)."""
    pod_status = pod.get("status") or {}
    return [
        (init, cs)
        for init, key in ((True, "initContainerStatuses"), (False, "containerStatuses"))
        for cs in pod_status.get(key) or []
        if (cs.get("state") or {}).get("waiting") is not None
    ]


def phase_of_pod(pod: Mapping[str, Any]) -> str:
    """The pod's phase as the job counts it: a Running pod with a container that waits
    (a sidecar in CrashLoopBackOff, a container being restarted) is not running yet,
    so it counts as Pending; a job never says its pods run while one of them does not."""
    pod_status = pod.get("status") or {}
    phase = str(pod_status.get("phase") or "Pending")
    if phase == "Running" and _any_waiting(pod_status):
        return "Pending"
    return phase


def _any_waiting(pod_status: Mapping[str, Any]) -> bool:
    """Whether a container of the pod waits (waiting_containers, without the list: every
    pass counts every pod's phase a few times)."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in pod_status.get(key) or ():
            if (cs.get("state") or {}).get("waiting") is not None:
                return True
    return False


_COUNTED = ("Running", "Succeeded", "Failed")


def count_pods(pods: Sequence[Mapping[str, Any]]) -> ObservedPodCounts:
    """Pods being deleted are not counted: they are on their way out."""
    counts = dict.fromkeys(_COUNTED, 0)
    pending = 0
    for pod in pods:
        if being_deleted(pod):
            continue
        phase = phase_of_pod(pod)
        if phase in counts:
            counts[phase] += 1
        else:
            pending += 1
    return ObservedPodCounts(
        pending=pending,
        running=counts["Running"],
        succeeded=counts["Succeeded"],
        failed=counts["Failed"],
    )

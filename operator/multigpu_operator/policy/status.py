"""A job's phases, pod counts and failures as read from its pods (pure).

The rules that move a job between phases are in reconcile.py (and docs/lifecycle.md).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.policy.conditions import ConditionType, Event


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED})


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
    phases = [
        p.get("status", {}).get("phase", "Pending")
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    ]
    return PodCounts(
        pending=sum(ph not in ("Running", "Succeeded", "Failed") for ph in phases),
        running=phases.count("Running"),
        succeeded=phases.count("Succeeded"),
        failed=phases.count("Failed"),
    )


@dataclass(frozen=True)
class Failure:
    pod: str
    rank: str
    exit_code: int | None
    reason: str
    uid: str = ""
    # Ended by something outside the pod (its node lost, eviction, preemption): Kubernetes
    # marks such pods with a DisruptionTarget condition.
    disrupted: bool = False

    def message(self) -> str:
        code = f" with exit code {self.exit_code}" if self.exit_code is not None else ""
        return f"pod {self.pod} (replica {self.rank}) failed{code}: {self.reason}"

    def as_status(self, attempt: int) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "replicaIndex": int(self.rank) if self.rank.isdigit() else None,
            "exitCode": self.exit_code,
            "reason": self.reason,
            "attempt": attempt,
        }


def lost_pod(name: str, index: int) -> Failure:
    """A pod of a running attempt that disappeared: its node was lost, or it was evicted
    or deleted. There is no exit code."""
    return Failure(name, str(index), None, "pod deleted (node lost, evicted or deleted by hand)")


def first_failure(pods: Sequence[Mapping[str, Any]]) -> Failure | None:
    """The failed pod that finished first, with its trainer's exit code and reason."""
    found = failures(pods)
    return found[0] if found else None


def failures(pods: Sequence[Mapping[str, Any]]) -> list[Failure]:
    """Every failed pod, the first to finish first."""
    failed = [p for p in pods if p.get("status", {}).get("phase") == "Failed"]

    def finished(p: Mapping[str, Any]) -> str:
        term = _terminated(p)
        return str(term.get("finishedAt", "")) if term else ""

    failed.sort(key=lambda p: (finished(p), p["metadata"]["name"]))
    return [_failure(p) for p in failed]


def _failure(pod: Mapping[str, Any]) -> Failure:
    term = _terminated(pod)
    labels = pod["metadata"].get("labels", {})
    for cond in pod.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return Failure(
                pod=pod["metadata"]["name"],
                rank=labels.get("multigpu.dev/replica-index", "?"),
                exit_code=None,
                reason=f"disrupted ({cond.get('reason') or 'DisruptionTarget'})",
                uid=pod["metadata"].get("uid", ""),
                disrupted=True,
            )
    return Failure(
        pod=pod["metadata"]["name"],
        rank=labels.get("multigpu.dev/replica-index", "?"),
        exit_code=int(term["exitCode"]) if term and "exitCode" in term else None,
        reason=(term or {}).get("reason") or pod.get("status", {}).get("reason") or "Failed",
        uid=pod["metadata"].get("uid", ""),
    )


def _terminated(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    for cs in pod.get("status", {}).get("containerStatuses", []) or []:
        term = cs.get("state", {}).get("terminated")
        if term and (cs.get("name") == "trainer" or term.get("exitCode", 0) != 0):
            return dict(term)
    statuses = pod.get("status", {}).get("containerStatuses", []) or []
    if statuses and statuses[0].get("state", {}).get("terminated"):
        return dict(statuses[0]["state"]["terminated"])
    return None


@dataclass(frozen=True)
class StatusUpdate:
    status: dict[str, Any]
    events: tuple[Event, ...]
    # The phase the job entered with this update, if it changed.
    entered: Phase | None


def failed_status(
    previous: Mapping[str, Any], generation: int, reason: str, message: str, now: str
) -> StatusUpdate:
    """The job failed for a reason outside its pods (an invalid spec or pod template)."""
    if previous.get("phase") == Phase.FAILED:
        return StatusUpdate(dict(previous), (), None)
    condition = {
        "type": str(ConditionType.FAILED),
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
        "observedGeneration": generation,
    }
    others = [c for c in previous.get("conditions", []) if c["type"] != ConditionType.FAILED]
    status = {
        **previous,
        "phase": str(Phase.FAILED),
        "conditions": [*others, condition],
        "observedGeneration": generation,
        "completionTime": now,
    }
    return StatusUpdate(status, (Event("Warning", reason, message),), Phase.FAILED)

"""Job status from observed pods: phase, conditions, counts (pure).

Success rule: a job Succeeded when every one of its pods has Succeeded (for DDP and
model parallelism every rank ends the collective together; for Elastic torchrun's
agents all exit 0 when the group finishes). A job Failed as soon as one of its pods
Failed: a failed rank breaks the collective. Terminal phases never change back.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.names import job_selector


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED})


class ConditionType(enum.StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


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

    def message(self) -> str:
        code = f" with exit code {self.exit_code}" if self.exit_code is not None else ""
        return f"pod {self.pod} (replica {self.rank}) failed{code}: {self.reason}"


def first_failure(pods: Sequence[Mapping[str, Any]]) -> Failure | None:
    """The failed pod that finished first, with its trainer's exit code and reason."""
    failed = [p for p in pods if p.get("status", {}).get("phase") == "Failed"]
    if not failed:
        return None

    def finished(p: Mapping[str, Any]) -> str:
        term = _terminated(p)
        return str(term.get("finishedAt", "")) if term else ""

    pod = min(failed, key=lambda p: (finished(p), p["metadata"]["name"]))
    term = _terminated(pod)
    labels = pod["metadata"].get("labels", {})
    return Failure(
        pod=pod["metadata"]["name"],
        rank=labels.get("multigpu.dev/replica-index", "?"),
        exit_code=int(term["exitCode"]) if term and "exitCode" in term else None,
        reason=(term or {}).get("reason") or pod.get("status", {}).get("reason") or "Failed",
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
class Event:
    """A Kubernetes Event to post on the job after the status write."""

    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class StatusUpdate:
    status: dict[str, Any]
    events: tuple[Event, ...]
    # The phase the job entered with this update, if it changed.
    entered: Phase | None


def derive_status(
    *,
    job_name: str,
    generation: int,
    expected_pods: int,
    world_size: int | None,
    pods: Sequence[Mapping[str, Any]],
    previous: Mapping[str, Any],
    now: str,
    all_created: bool,
) -> StatusUpdate:
    """The status a job should have now, and the events its transitions produce."""
    prev_phase = Phase(previous["phase"]) if previous.get("phase") else None
    counts = count_pods(pods)
    conditions = {c["type"]: dict(c) for c in previous.get("conditions", [])}
    events: list[Event] = []

    def set_condition(ctype: ConditionType, status: bool, reason: str, message: str) -> None:
        old = conditions.get(ctype)
        value = "True" if status else "False"
        if old and old.get("status") == value and old.get("reason") == reason:
            old["message"], old["observedGeneration"] = message, generation
            return
        if old is None and not status:
            return  # a condition appears the first time it holds
        conditions[ctype] = {
            "type": str(ctype),
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
            "observedGeneration": generation,
        }
        if status:
            kind = "Warning" if ctype is ConditionType.FAILED else "Normal"
            events.append(Event(kind, reason, message))

    if all_created and prev_phase not in TERMINAL:
        set_condition(
            ConditionType.CREATED, True, "PodsCreated", f"created {expected_pods} pods and service"
        )
    if prev_phase in TERMINAL:
        phase = prev_phase
    elif (failure := first_failure(pods)) is not None:
        phase = Phase.FAILED
        set_condition(ConditionType.RUNNING, False, "PodFailed", failure.message())
        set_condition(ConditionType.FAILED, True, "PodFailed", failure.message())
    elif expected_pods and counts.succeeded >= expected_pods:
        phase = Phase.SUCCEEDED
        msg = f"all {expected_pods} pods succeeded"
        set_condition(ConditionType.RUNNING, False, "JobSucceeded", msg)
        set_condition(ConditionType.SUCCEEDED, True, "AllPodsSucceeded", msg)
    elif expected_pods and counts.running + counts.succeeded >= expected_pods:
        phase = Phase.RUNNING
        set_condition(
            ConditionType.RUNNING, True, "AllPodsRunning", f"{counts.running} pods running"
        )
    else:
        phase = Phase.PENDING

    status: dict[str, Any] = {
        "phase": str(phase),
        "conditions": sorted(conditions.values(), key=_condition_order),
        "pods": counts.as_status(),
        "replicas": counts.total,
        "selector": job_selector(job_name),
        "observedGeneration": generation,
        "startTime": previous.get("startTime") or now,
    }
    if world_size is not None:
        status["worldSize"] = world_size
    elif "worldSize" in previous:
        status["worldSize"] = previous["worldSize"]
    if phase in TERMINAL:
        status["completionTime"] = previous.get("completionTime") or now
    entered = phase if phase != prev_phase else None
    return StatusUpdate(status=status, events=tuple(events), entered=entered)


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


_ORDER = {str(c): i for i, c in enumerate(ConditionType)}


def _condition_order(cond: Mapping[str, Any]) -> int:
    return _ORDER.get(str(cond["type"]), len(_ORDER))


def status_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return dict(old) != dict(new)

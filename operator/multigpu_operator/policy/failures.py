"""Failed pods as the operator reads them: which replica, which exit code, and whether
something outside the pod ended it (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.status import LastFailure
from multigpu_operator.policy.pods import name_of


@dataclass(frozen=True)
class Failure:
    pod: str
    replica: str  # the replica index, as the pod's label has it ("?" if it has none)
    exit_code: int | None
    reason: str
    uid: str = ""
    # Ended by something outside the pod (its node lost, eviction, preemption): Kubernetes
    # marks such pods with a DisruptionTarget condition.
    disrupted: bool = False
    # What the user can do about it, or what the kubelet said (an eviction's message).
    detail: str = ""
    # The trainer found a set-up that cannot work: every attempt would fail alike.
    setup_error: bool = False

    def message(self) -> str:
        code = f" with exit code {self.exit_code}" if self.exit_code is not None else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"pod {self.pod} (replica {self.replica}) failed{code}: {self.reason}{detail}"

    def as_status(self, attempt: int) -> LastFailure:
        return LastFailure(
            pod=self.pod,
            replica_index=int(self.replica) if self.replica.isdigit() else None,
            exit_code=self.exit_code,
            reason=self.reason,
            attempt=attempt,
        )


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
        ended = _terminated(p)
        return str(ended[1].get("finishedAt", "")) if ended else ""

    failed.sort(key=lambda p: (finished(p), name_of(p)))
    return [_failure(p) for p in failed]


def _failure(pod: Mapping[str, Any]) -> Failure:
    replica = pod["metadata"].get("labels", {}).get(names.LABEL_REPLICA_INDEX, "?")
    uid = pod["metadata"].get("uid", "")
    status = pod.get("status", {})
    # The kubelet's own words on an eviction ("The node was low on resource: memory...").
    kubelet_message = str(status.get("message") or "").strip()
    for cond in status.get("conditions", []) or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            reason = f"disrupted ({cond.get('reason') or 'DisruptionTarget'})"
            detail = str(cond.get("message") or "").strip() or kubelet_message
            return Failure(name_of(pod), replica, None, reason, uid, True, detail)
    if status.get("reason") == "Evicted":
        # No exit code: the kubelet ended the pod, not the trainer.
        return Failure(name_of(pod), replica, None, "Evicted", uid, detail=kubelet_message)
    container, term = _terminated(pod) or ("", None)
    reason = (term or {}).get("reason") or status.get("reason") or "Failed"
    exit_code = int(term["exitCode"]) if term and "exitCode" in term else None
    # Under torchrun the container exits 1 whatever the worker did; the worker's
    # termination message still says it was a set-up error.
    said = str((term or {}).get("message") or "").strip()
    if exit_code == SETUP_ERROR_EXIT_CODE or said.startswith(SETUP_ERROR_PREFIX):
        detail = said.removeprefix(SETUP_ERROR_PREFIX)
        return Failure(name_of(pod), replica, exit_code, SETUP_ERROR, uid, False, detail, True)
    return Failure(
        pod=name_of(pod),
        replica=replica,
        exit_code=exit_code,
        reason=reason,
        uid=uid,
        detail=_OOM_ADVICE.format(container=container) if reason == OOM_KILLED else "",
    )


# The trainer image's exit code and termination message for a set-up that cannot work
# (multigpu_train/errors.py): the same image, flags and data fail the same way again.
SETUP_ERROR = "SetupError"
SETUP_ERROR_EXIT_CODE = 78
SETUP_ERROR_PREFIX = "SetupError: "


OOM_KILLED = "OOMKilled"
_OOM_ADVICE = (
    "container {container} used more memory than its limit; raise its "
    "resources.limits.memory in spec.template (a memory-backed /dev/shm, spec.shmSize, "
    "counts against it too)"
)


def _terminated(pod: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """How the pod ended, and which container said so: the first container that is the
    trainer or exited non-zero, else the first container."""
    statuses = pod.get("status", {}).get("containerStatuses", []) or []
    for cs in statuses:
        term = cs.get("state", {}).get("terminated")
        if term and (cs.get("name") == "trainer" or term.get("exitCode", 0) != 0):
            return str(cs.get("name", "?")), dict(term)
    if statuses and statuses[0].get("state", {}).get("terminated"):
        return str(statuses[0].get("name", "?")), dict(statuses[0]["state"]["terminated"])
    return None

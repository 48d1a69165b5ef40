"""Failed pods as the operator reads them: which replica, which exit code, and whether
something outside the pod ended it (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.failure_policy import Fault
from multigpu_operator.api.status import FailedPod, LastFailure
from multigpu_operator.policy.failures.faults import (
    Diagnosis,
    diagnose,
    disruption,
    node_of,
    unhealthy_device,
)
from multigpu_operator.policy.kube.pods import name_of


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
    # What the failure-policy rules match on besides the exit code: every container's
    # termination reason and the pod's status.reason; the pod's True condition types.
    reasons: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()
    node: str = ""
    # The infrastructure fault that ended it (policy/failures/faults.py), if any.
    diagnosis: Diagnosis | None = None

    @property
    def fault(self) -> Fault | None:
        return self.diagnosis.fault if self.diagnosis else None

    def message(self) -> str:
        code = f" with exit code {self.exit_code}" if self.exit_code is not None else ""
        detail = f": {self.detail}" if self.detail else ""
        told = f"pod {self.pod} (replica {self.replica}) failed{code}: {self.reason}{detail}"
        # Where and what, once known: the fault's name alone is in the reason already.
        where = self.diagnosis and (self.diagnosis.node or self.diagnosis.device)
        return f"{told} [{self.diagnosis.describe()}]" if self.diagnosis and where else told

    def as_failed_pod(self) -> FailedPod:
        node = {"node": self.node} if self.node else {}
        return FailedPod(
            pod=self.pod,
            replica_index=self._index(),
            exit_code=self.exit_code,
            reason=self.reason,
            **node,
        )

    def as_status(self, attempt: int, rule: str = "") -> LastFailure:
        known: dict[str, Any] = {"node": self.node, "rule": rule}
        if self.diagnosis:
            known |= {"fault": str(self.diagnosis.fault), "device": self.diagnosis.device}
        return LastFailure(
            pod=self.pod,
            replica_index=self._index(),
            exit_code=self.exit_code,
            reason=self.reason,
            attempt=attempt,
            **{k: v for k, v in known.items() if v},
        )

    def _index(self) -> int | None:
        return int(self.replica) if self.replica.isdigit() else None


def lost_pod(
    name: str,
    index: int,
    last_seen: Mapping[str, Any] | None = None,
    nodes: Sequence[Mapping[str, Any]] = (),
) -> Failure:
    """A pod of a running attempt that disappeared, or is being deleted: its node was
    lost, or it was evicted or deleted. There is no exit code. `last_seen`: the pod as
    last seen (being deleted), which may say why."""
    lost = Failure(name, str(index), None, "pod deleted (node lost, evicted or deleted by hand)")
    if last_seen is None:
        return lost
    return _with_facts(lost, last_seen, nodes)


def first_failure(pods: Sequence[Mapping[str, Any]]) -> Failure | None:
    """The failed pod that finished first, with its trainer's exit code and reason."""
    found = failures(pods)
    return found[0] if found else None


def failures(
    pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]] = ()
) -> list[Failure]:
    """Every failed pod, the first to finish first; then every pod still running on a
    GPU the kubelet reports unhealthy (its training cannot go on)."""
    failed = [p for p in pods if p.get("status", {}).get("phase") == "Failed"]

    def finished(p: Mapping[str, Any]) -> str:
        ended = _terminated(p)
        return str(ended[1].get("finishedAt", "")) if ended else ""

    failed.sort(key=lambda p: (finished(p), name_of(p)))
    found = [_with_facts(_failure(p), p, nodes) for p in failed]
    for pod in pods:
        device = unhealthy_device(pod)
        phase = pod.get("status", {}).get("phase")
        if device and phase in ("Pending", "Running"):
            replica = pod["metadata"].get("labels", {}).get(names.LABEL_REPLICA_INDEX, "?")
            failure = Failure(
                name_of(pod), replica, None, "GPUUnhealthy", pod["metadata"].get("uid", "")
            )
            found.append(_with_facts(failure, pod, nodes))
    return found


def _with_facts(
    failure: Failure, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]
) -> Failure:
    """The failure with what the rules match on and the fault that ended it, if any."""
    pod_status = pod.get("status") or {}
    reasons = [
        str(term["reason"])
        for cs in pod_status.get("containerStatuses") or []
        if (term := (cs.get("state") or {}).get("terminated")) and term.get("reason")
    ]
    if pod_status.get("reason"):
        reasons.append(str(pod_status["reason"]))
    conditions = tuple(
        str(c["type"]) for c in pod_status.get("conditions") or [] if c.get("status") == "True"
    )
    return replace(
        failure,
        reasons=tuple(dict.fromkeys([failure.reason, *reasons])),
        conditions=conditions,
        node=node_of(pod),
        diagnosis=diagnose(pod, nodes),
    )


def _failure(pod: Mapping[str, Any]) -> Failure:
    replica = pod["metadata"].get("labels", {}).get(names.LABEL_REPLICA_INDEX, "?")
    uid = pod["metadata"].get("uid", "")
    pod_status = pod.get("status", {})
    # The kubelet's own words on an eviction ("The node was low on resource: memory...").
    kubelet_message = str(pod_status.get("message") or "").strip()
    cond = disruption(pod)
    if cond is not None:
        reason = f"disrupted ({cond.get('reason') or 'DisruptionTarget'})"
        detail = str(cond.get("message") or "").strip() or kubelet_message
        return Failure(name_of(pod), replica, None, reason, uid, True, detail)
    if pod_status.get("reason") == "Evicted":
        # No exit code: the kubelet ended the pod, not the trainer.
        return Failure(name_of(pod), replica, None, "Evicted", uid, detail=kubelet_message)
    container, term = _terminated(pod) or ("", None)
    reason = (term or {}).get("reason") or pod_status.get("reason") or "Failed"
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

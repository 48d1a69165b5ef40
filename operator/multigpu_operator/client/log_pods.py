"""A job's pod logs: which pods to read, in what order, and how their lines are shown
(the client's `logs`, `mgj logs`).

Pure: pods and the job come in as the API server's JSON; client/pod_logs.py does the
requests. A retry replaces a job's pods under the same names, so pods are told apart by
the attempt label (api/pod_labels.py) and, while following, by their UID.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from multigpu_operator.api.pod_labels import attempt_of, replica_index
from multigpu_operator.api.spec import KIND
from multigpu_operator.api.status import TERMINAL
from multigpu_operator.api.template import trainer_index

Pod = Mapping[str, Any]


class Output(Protocol):
    """Where log lines go: a text stream (stdout), or the client's queue of lines."""

    def write(self, text: str, /) -> int: ...

    def writelines(self, lines: list[str], /) -> None: ...

    def flush(self) -> None: ...


class LogsError(Exception):
    """Why no log can be shown: one line for the user."""


@dataclass(frozen=True)
class LogRequest:
    """What `mgj logs` was asked for."""

    job: str
    namespace: str
    attempt: int | None = None  # None: the latest attempt that has pods
    container: str | None = None  # None: the training container
    tail: int | None = None  # lines from the end of each log; None: all
    timestamps: bool = False
    replica: int | None = None  # None: every replica


def missing_job(request: LogRequest) -> LogsError:
    return LogsError(f"no {KIND} {request.job!r} in namespace {request.namespace!r}")


def pod_name(pod: Pod) -> str:
    return str((pod.get("metadata") or {}).get("name", "?"))


def pod_key(pod: Pod) -> str:
    """Tells a pod from its namesake of another attempt."""
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('name')}@{attempt_of(pod)}")


def by_replica_index(pods: Iterable[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda pod: (replica_index(pod), attempt_of(pod), pod_name(pod)))


def pods_of_attempt(request: LogRequest, pods: Sequence[Pod]) -> list[Pod]:
    """The pods of the attempt asked for (else the latest that has pods), by replica
    index; LogsError when there are none."""
    where = f"{KIND} {request.job!r} in namespace {request.namespace!r}"
    if not pods:
        raise LogsError(f"{where} has no pods")
    attempts = sorted({attempt_of(pod) for pod in pods})
    wanted = attempts[-1] if request.attempt is None else request.attempt
    chosen = [pod for pod in pods if attempt_of(pod) == wanted]
    if chosen and request.replica is not None:
        chosen = [pod for pod in chosen if replica_index(pod) == request.replica]
        if not chosen:
            raise LogsError(f"{where} has no pod of replica {request.replica} in attempt {wanted}")
    if not chosen:
        found = ", ".join(str(a) for a in attempts)
        raise LogsError(f"{where} has no pods of attempt {wanted}; it has pods of attempt {found}")
    return by_replica_index(chosen)


def followed(request: LogRequest, pods: Iterable[Pod], first_attempt: int) -> list[Pod]:
    """The pods to follow: those of the attempt asked for, else of the first attempt
    followed and every later one (a retry's new pods)."""
    if request.replica is not None:
        pods = [p for p in pods if replica_index(p) == request.replica]
    if request.attempt is not None:
        return by_replica_index(p for p in pods if attempt_of(p) == request.attempt)
    return by_replica_index(p for p in pods if attempt_of(p) >= first_attempt)


def container_of(pod: Pod, wanted: str | None) -> str:
    """The container asked for, else the training one ("trainer", else the first)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    names = [str(c.get("name")) for c in containers]
    if wanted is None:
        if not names:
            raise LogsError(f"pod {pod_name(pod)!r} has no containers")
        return names[trainer_index(containers)]
    if wanted not in names:
        raise LogsError(
            f"pod {pod_name(pod)!r} has no container {wanted!r}; its containers: "
            + ", ".join(names)
        )
    return wanted


def prefix(pod: Pod) -> str:
    """What each line of the pod's log starts with: `[train-1 r1] `."""
    return f"[{pod_name(pod)} r{replica_index(pod)}] "


def prefixed(pod: Pod, text: str) -> list[str]:
    """Each line of `text`, prefixed, with its newline."""
    start = prefix(pod)
    return [f"{start}{line}\n" for line in text.splitlines()]


def log_params(request: LogRequest, container: str, follow: bool) -> dict[str, str]:
    """The query of the pod log endpoint (GET .../pods/NAME/log)."""
    params = {"container": container}
    if follow:
        params["follow"] = "true"
    if request.tail is not None:
        params["tailLines"] = str(request.tail)
    if request.timestamps:
        params["timestamps"] = "true"
    return params


def finished(job: Mapping[str, Any]) -> bool:
    """Whether the job is Succeeded or Failed: no pod of it starts again."""
    return (job.get("status") or {}).get("phase") in TERMINAL

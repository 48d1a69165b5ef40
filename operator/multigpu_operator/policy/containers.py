"""Containers the kubelet cannot start, read from the pods' container states (pure).

A pod whose image cannot be pulled, whose ConfigMap key is missing or whose container
keeps crashing stays Pending (or Running, restarting its container) with a reason only
its container status tells: `waiting: {reason: ImagePullBackOff, message: ...}`. This
step puts the first such problem of the current attempt on the job's Running condition,
naming the pod, its replica index, the container, the image and the kubelet's message,
and posts it as a Warning event when it is new.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.status import ConditionType
from multigpu_operator.policy.conditions import Event, condition
from multigpu_operator.policy.pods import count_pods, name_of, replica_index
from multigpu_operator.policy.step import Observed, Outcome, Progress

# Waiting reasons of the kubelet and container runtime that mean "this container does not
# start", as opposed to ContainerCreating / PodInitializing, which are progress.
IMAGE_PULL = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
CONFIG = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
CRASH_LOOP = "CrashLoopBackOff"
NOT_STARTING = IMAGE_PULL | CONFIG | {CRASH_LOOP}
# The reason this step leaves on the Running condition once the problem is gone.
STARTING = "PodsStarting"


@dataclass(frozen=True)
class ContainerProblem:
    pod: str
    replica: int
    container: str
    init: bool
    reason: str  # the kubelet's waiting reason, e.g. ImagePullBackOff
    kubelet_message: str
    image: str

    def message(self) -> str:
        kind = "init container" if self.init else "container"
        what = f'{self.reason} (image "{self.image}")' if self.reason in IMAGE_PULL else self.reason
        detail = f": {self.kubelet_message}" if self.kubelet_message else ""
        return f"pod {self.pod} (replica {self.replica}) {kind} {self.container}: {what}{detail}"


def container_problems(pods: Iterable[Mapping[str, Any]]) -> list[ContainerProblem]:
    """Every container of `pods` that the kubelet reports as not starting, init containers
    first (they run first), in pod order."""
    found = []
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        for init, key in ((True, "initContainerStatuses"), (False, "containerStatuses")):
            for cs in status.get(key) or []:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in NOT_STARTING:
                    found.append(
                        ContainerProblem(
                            pod=name_of(pod),
                            replica=replica_index(pod),
                            container=str(cs.get("name", "?")),
                            init=init,
                            reason=str(waiting["reason"]),
                            kubelet_message=str(waiting.get("message") or "").strip(),
                            image=str(cs.get("image", "?")),
                        )
                    )
    return found


def container_states(seen: Observed, progress: Progress) -> Outcome:
    current = seen.current(progress.attempt)
    problems = container_problems(current)
    previous = _previous_running(seen)
    if not problems:
        if previous.get("status") == "False" and previous.get("reason") in NOT_STARTING:
            running = count_pods(current).running
            msg = f"{running} of {len(seen.desired.pods)} pods running"
            return Outcome(changes=(condition(ConditionType.RUNNING, False, STARTING, msg),))
        return Outcome()
    first = problems[0]
    msg = first.message()
    if len(problems) > 1:
        msg += f" (and {len(problems) - 1} more)"
    changes: list[Any] = [condition(ConditionType.RUNNING, False, first.reason, msg)]
    if (previous.get("reason"), previous.get("message")) != (first.reason, msg):
        changes.append(Event("Warning", first.reason, msg))
    return Outcome(changes=tuple(changes))


def _previous_running(seen: Observed) -> Mapping[str, Any]:
    for cond in seen.previous.get("conditions", []):
        if cond["type"] == ConditionType.RUNNING:
            return dict(cond)
    return {}

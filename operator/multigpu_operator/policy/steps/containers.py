"""Containers the kubelet cannot start, read from the pods' container states, and
spec.startPolicy (pure).

A pod whose image cannot be pulled, whose ConfigMap key is missing or whose container
keeps crashing stays Pending (or Running, restarting its container) with a reason only
its container status tells: `waiting: {reason: ImagePullBackOff, message: ...}`. The
kubelet retries most of these forever, so no pod ever fails of them. This step puts the
worst such problem of the current attempt on the job's Running condition, naming the
pod, its replica index, the container, the image and the kubelet's message, posts it as
a Warning event when it is new, and applies spec.startPolicy: errors no retry can fix
end the job at once, those the kubelet retries once they have lasted timeoutSeconds
(status.cannotStartSince), and a container in CrashLoopBackOff (it did start; the
kubelet restarts it) is waited for.

An elastic job that trains (at least minReplicas pods run) is not held up by a pod that
cannot start: its Running condition names the problem (policy/steps/status.py) and the
problem is posted once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.pod_labels import replica_index
from multigpu_operator.api.start import StartTimeoutAction
from multigpu_operator.api.status import Condition, ConditionType, JobStatus
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import ConditionChange, Event, condition
from multigpu_operator.policy.kube.pods import count_pods, name_of, waiting_containers
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Observed, Outcome, Progress

# Waiting reasons of the kubelet and container runtime that mean "this container does not
# start", as opposed to ContainerCreating / PodInitializing, which are progress.
IMAGE_PULL = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
CONFIG = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
CRASH_LOOP = "CrashLoopBackOff"
NOT_STARTING = IMAGE_PULL | CONFIG | {CRASH_LOOP}
# No retry can fix these: the image reference does not parse, or the pull policy forbids
# pulling an image the node does not have. The kubelet does not even back off.
UNFIXABLE = frozenset({"InvalidImageName", "ErrImageNeverPull"})
# The kubelet retries these with back-off; they may heal (a registry hiccup, a ConfigMap
# created a moment later), so they fail the job only once they have lasted the timeout.
RETRIED = NOT_STARTING - UNFIXABLE - {CRASH_LOOP}
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

    @property
    def severity(self) -> int:
        """0 for what no retry fixes, 1 for what the kubelet retries, 2 for a crash loop."""
        return 0 if self.reason in UNFIXABLE else 1 if self.reason in RETRIED else 2


def container_problems(pods: Iterable[Mapping[str, Any]]) -> list[ContainerProblem]:
    """Every container of `pods` that the kubelet reports as not starting, init containers
    first (they run first), in pod order."""
    found = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for init, cs in waiting_containers(pod):
            waiting = cs["state"]["waiting"]
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


def summary(problems: list[ContainerProblem]) -> str:
    """The worst problem (what no retry fixes first, a crash loop last), and how many
    more there are; "" if none."""
    if not problems:
        return ""
    worst = min(problems, key=lambda p: p.severity)
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return worst.message() + more


def container_states(seen: Observed, progress: Progress) -> Outcome:
    current = seen.current(progress.attempt)
    problems = container_problems(current)
    previous = seen.previous.condition(ConditionType.RUNNING)
    if not problems:
        if previous and not previous.holds and previous.reason in NOT_STARTING:
            running = count_pods(current).running
            msg = f"{running} of {len(seen.desired.pods)} pods running"
            return Outcome(changes=(condition(ConditionType.RUNNING, False, STARTING, msg),))
        return Outcome()
    worst = min(problems, key=lambda p: p.severity)
    text = summary(problems)
    policy = seen.job.spec.elastic
    if seen.elastic and policy and count_pods(current).running >= policy.min_replicas:
        # It trains: the Running condition carries the problem (policy/steps/status.py).
        new = previous is None or text not in (previous.message or "")
        return Outcome(changes=(Event("Warning", worst.reason, text),) if new else ())
    return _start_policy(seen, worst, text, previous)


def _start_policy(
    seen: Observed, worst: ContainerProblem, text: str, previous: Condition | None
) -> Outcome:
    """spec.startPolicy for a job held up by `worst` (and maybe more)."""
    policy = seen.job.spec.start_policy
    timeout = policy.timeout_seconds
    failing = policy.on_timeout is StartTimeoutAction.FAIL
    status = JobStatus()
    wake: tuple[float, ...] = ()
    if worst.severity == 0:
        if failing:
            return fail(worst.reason, f"{text}; no retry can fix this")
        note = "no retry can fix this; waiting (startPolicy.onTimeout Wait)"
    elif worst.severity == 1:
        since = seen.previous.cannot_start_since or seen.now
        waited = (seen.now - since).total_seconds()
        status = JobStatus(cannot_start_since=rfc3339(since))
        if not failing:
            note = "waiting for it to heal (startPolicy.onTimeout Wait)"
        elif waited >= timeout:
            return fail(
                worst.reason, f"{text}; still failing after startPolicy.timeoutSeconds ({timeout}s)"
            )
        else:
            note = f"the job fails if this lasts startPolicy.timeoutSeconds ({timeout}s)"
            wake = (timeout - waited,)
    else:
        note = "the kubelet keeps restarting it"
    msg = f"{text}; {note}"
    changes: list[ConditionChange | Event] = [
        condition(ConditionType.RUNNING, False, worst.reason, msg)
    ]
    if previous is None or (previous.reason, previous.message) != (worst.reason, msg):
        changes.append(Event("Warning", worst.reason, msg))
    return Outcome(status=status, changes=tuple(changes), wake_after=wake)

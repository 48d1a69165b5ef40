"""A job's life driven through the pure reconcile pass, with pods as plain dicts.

`JobRun` applies each Decision the way the controller does (status first, then deletes,
then creates) and lets a test play the kubelet and the scheduler: schedule pods, run
them, finish them. No cluster: the same rules are proven on the real control plane in
tests/integration/test_lifecycle_*.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from multigpu_operator.api.spec import Job
from multigpu_operator.policy.step import Decision
from multigpu_operator.policy.training import TrainingReport
from multigpu_operator.reconcile import decide
from support.policy import inputs

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "train:1"}]}}


def job_object(mode: str = "DistributedDataParallel", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "job", "namespace": "ns", "uid": "uid-1", "generation": 1},
        "spec": {"mode": mode, "template": TEMPLATE, **spec},
    }


@dataclass
class JobRun:
    obj: dict[str, Any]
    now: datetime = T0
    status: dict[str, Any] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    deleted_job: bool = False
    nodes: list[dict[str, Any]] = field(default_factory=list)  # the node informer's view
    training: TrainingReport | None = None  # what the processes last reported
    # Pods deleted for a fault, as the watch last showed them (PodInformer.gone_of).
    gone: dict[str, dict[str, Any]] = field(default_factory=dict)
    _uids: int = 0

    def step(self, seconds: float = 0) -> Decision:
        """One reconcile pass, `seconds` after the previous one; its decision applied."""
        self.now += timedelta(seconds=seconds)
        job = Job.from_object(self.obj)
        pods = list(self.pods.values())
        decision = decide(
            inputs(
                job,
                pods,
                self.status,
                self.now,
                nodes=tuple(self.nodes),
                training=self.training,
                gone=tuple(self.gone.values()),
            )
        )
        self.decisions.append(decision)
        self.status = copy.deepcopy(decision.status.as_api())
        for name in decision.delete_pods:
            self.pods.pop(name, None)  # the kubelet is instant here
        for pod in decision.create_pods:
            self._uids += 1
            created = copy.deepcopy(pod)
            created["metadata"]["uid"] = f"pod-uid-{self._uids}"
            created["status"] = {"phase": "Pending"}
            self.pods[created["metadata"]["name"]] = created
        self.deleted_job = self.deleted_job or decision.delete_job
        return decision

    # The scheduler and the kubelet ---------------------------------------------------

    def run_all(self) -> None:
        for name in self.pods:
            self.set_phase(name, "Running")

    def set_phase(self, name: str, phase: str, exit_code: int | None = None) -> None:
        pod = self.pods[name]
        pod["spec"]["nodeName"] = "gpu-node-0"
        pod["status"] = {"phase": phase}
        if exit_code is not None:
            finished = (self.now).strftime("%Y-%m-%dT%H:%M:%SZ")
            term = {"exitCode": exit_code, "reason": "Error", "finishedAt": finished}
            pod["status"]["containerStatuses"] = [
                {"name": "trainer", "state": {"terminated": term}}
            ]

    def unschedulable(self, name: str, message: str) -> None:
        self.pods[name]["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ],
        }

    def waiting(self, name: str, reason: str, message: str = "", *, sidecar: bool = False) -> None:
        """A container of the pod waits for `reason`: the trainer of a Pending pod, or
        the native sidecar of a Running one."""
        pod = self.pods[name]
        pod["spec"]["nodeName"] = "gpu-node-0"
        state = {"waiting": {"reason": reason, "message": message}}
        if sidecar:
            running = {"name": "trainer", "image": "train:1", "state": {"running": {}}}
            pod["status"] = {
                "phase": "Running",
                "initContainerStatuses": [{"name": "log", "image": "log:1", "state": state}],
                "containerStatuses": [running],
            }
        else:
            container = {"name": "trainer", "image": "train:1", "state": state}
            pod["status"] = {"phase": "Pending", "containerStatuses": [container]}

    def gated(self, name: str) -> None:
        self.pods[name]["status"] = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
            ],
        }

    # Reading -------------------------------------------------------------------------

    def condition(self, ctype: str) -> dict[str, Any]:
        return next(c for c in self.status.get("conditions", []) if c["type"] == ctype)

    def attempts(self) -> set[str]:
        return {p["metadata"]["labels"]["multigpu.dev/attempt"] for p in self.pods.values()}

    def events(self) -> list[tuple[str, str]]:
        return [(e.type, e.reason) for d in self.decisions for e in d.events]

"""Infrastructure faults: what ended a pod from outside it (pure).

A pod lost with its node, evicted, preempted, stopped by a node shutdown, or given a GPU
that went bad did not fail because of the training code, so it is not counted against
spec.runPolicy.backoffLimit (policy/failures/rules.py). Told from the pod object and from
the nodes the pass sees (trimmed by cluster/nodes.py: name, labels, taints, allocatable).

Sources:
- DisruptionTarget reasons: k8s.io/api/core/v1 (PodReasonPreemptionByScheduler,
  DeletionByTaintManager, EvictionByEvictionAPI, DeletionByPodGC, TerminationByKubelet).
- A pod's status.reason after a node shutdown (kubelet nodeshutdown manager:
  "Terminated", with message "Pod was terminated in response to imminent node
  shutdown"), or a lost node ("NodeLost", older node lifecycle controllers).
- `containerStatuses[].allocatedResourcesStatus[].resources[].health`: KEP-4680
  (device plugin and DRA resource health in the pod status).
- GPU health taints: NVIDIA's NVSentinel fault quarantine taints a node with a GPU
  fault (configurable keys); operators commonly use nvidia.com/... keys naming the
  health, so a blocking taint under nvidia.com/ that mentions health, unhealthy or an
  Xid counts (docs.nvidia.com/nvsentinel/components/fault-quarantine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.failure_policy import Fault

Pod = Mapping[str, Any]
Node = Mapping[str, Any]

# The node lifecycle controller's taints for a node that stopped reporting.
NODE_LOST_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})
# The kubelet's and the node lifecycle controller's pod reasons.
_POD_REASONS = {
    "NodeLost": Fault.NODE_LOST,
    "Evicted": Fault.EVICTED,
    "Preempting": Fault.PREEMPTED,  # the kubelet made room for a critical pod
    "Terminated": Fault.NODE_SHUTDOWN,  # graceful node shutdown
    "Shutdown": Fault.NODE_SHUTDOWN,
    "NodeShutdown": Fault.NODE_SHUTDOWN,
}
_DISRUPTIONS = {
    "PreemptionByScheduler": Fault.PREEMPTED,
    "DeletionByTaintManager": Fault.NODE_LOST,
    "DeletionByPodGC": Fault.NODE_LOST,
    "EvictionByEvictionAPI": Fault.EVICTED,
}
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")
_GPU_TAINT_WORDS = ("health", "xid")


@dataclass(frozen=True)
class Diagnosis:
    fault: Fault
    node: str  # "" when not known
    device: str = ""  # the unhealthy device, where known
    why: str = ""  # what showed it, for the message

    def describe(self) -> str:
        where = f" on node {self.node}" if self.node else ""
        device = f" (device {self.device})" if self.device else ""
        why = f": {self.why}" if self.why else ""
        return f"{self.fault}{where}{device}{why}"


def disruption(pod: Pod) -> Mapping[str, Any] | None:
    """The pod's True DisruptionTarget condition: Kubernetes ended it from outside (PodGC,
    the taint manager, an eviction, a preemption); None if it did not."""
    conditions: Sequence[Mapping[str, Any]] = (pod.get("status") or {}).get("conditions") or ()
    true = (c for c in conditions if c.get("status") == "True")
    return next((c for c in true if c.get("type") == "DisruptionTarget"), None)


def node_of(pod: Pod) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def unhealthy_device(pod: Pod) -> tuple[str, str] | None:
    """(resource, device ID) of the first GPU the kubelet reports Unhealthy."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        for resource in cs.get("allocatedResourcesStatus") or []:
            name = str(resource.get("name") or "")
            if not name.startswith(GPU_RESOURCE_PREFIXES):
                continue
            for device in resource.get("resources") or []:
                if device.get("health") == "Unhealthy":
                    return name, str(device.get("resourceID") or "?")
    return None


def diagnose(pod: Pod, nodes: Sequence[Node]) -> Diagnosis | None:
    """The infrastructure fault that ended `pod` (failed, or being deleted), or None
    if nothing says the infrastructure ended it."""
    node = node_of(pod)
    device = unhealthy_device(pod)
    if device:
        return Diagnosis(Fault.GPU_UNHEALTHY, node, device[1], f"{device[0]} reported Unhealthy")
    by_name = {str(n["metadata"]["name"]): n for n in nodes}
    taint = _gpu_health_taint(by_name.get(node))
    if taint:
        return Diagnosis(Fault.GPU_UNHEALTHY, node, why=f"the node has taint {taint}")
    pod_status = pod.get("status") or {}
    reason = str(pod_status.get("reason") or "")
    cond = disruption(pod)
    if cond is not None:
        said = str(cond.get("reason") or "DisruptionTarget")
        fault = _DISRUPTIONS.get(said) or _POD_REASONS.get(reason) or Fault.EVICTED
        if "shutdown" in f"{cond.get('message')} {pod_status.get('message')}".lower():
            fault = Fault.NODE_SHUTDOWN  # the kubelet's graceful node shutdown
        return Diagnosis(fault, node, why=said)
    if reason in _POD_REASONS:
        return Diagnosis(_POD_REASONS[reason], node, why=reason)
    if reason == "UnexpectedAdmissionError" and "nvidia.com/" in str(pod_status.get("message")):
        # The kubelet could not give the pod its GPUs (a device gone unhealthy).
        return Diagnosis(Fault.GPU_UNHEALTHY, node, why=str(pod_status.get("message")))
    if node and by_name:
        if node not in by_name:
            return Diagnosis(Fault.NODE_LOST, node, why="the node was removed")
        lost = _lost_taint(by_name[node])
        if lost:
            return Diagnosis(Fault.NODE_LOST, node, why=f"the node has taint {lost}")
    return None


def _taints(node: Node | None) -> list[Mapping[str, Any]]:
    return list(((node or {}).get("spec") or {}).get("taints") or [])


def _lost_taint(node: Node) -> str:
    return next((str(t["key"]) for t in _taints(node) if t.get("key") in NODE_LOST_TAINTS), "")


def _gpu_health_taint(node: Node | None) -> str:
    for taint in _taints(node):
        key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        said = f"{key}={value}".lower()
        if key.startswith("nvidia.com/") and any(w in said for w in _GPU_TAINT_WORDS):
            return f"{key}={value}" if value else key
    return ""

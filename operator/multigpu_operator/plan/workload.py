"""The Kueue Workload that stands for a queued job (pure), and the job's pods as Kueue's
admission places them.

One pod set, `workers`: every replica of a job has the same template, so Kueue reserves
`replicas` times one pod's requests (GPUs included). The name is deterministic (a retry
after a crash finds the Workload it created), derived from the job's name and UID as
Kueue's own job integrations derive theirs.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api import kueue, names
from multigpu_operator.api.kueue_topology import TopologyAssignment, topology_request
from multigpu_operator.api.pod_labels import replica_index
from multigpu_operator.api.spec import KIND, Job
from multigpu_operator.plan import DesiredState
from multigpu_operator.plan.errors import PlanError
from multigpu_operator.plan.meta import owner_references

# Kubernetes object names may be 253 characters; Kueue keeps its prefixes to this.
_PREFIX_MAX = 57


@dataclass(frozen=True)
class PriorityClass:
    """A WorkloadPriorityClass: its name and value (Kueue wants both on the Workload)."""

    name: str
    value: int


@dataclass(frozen=True)
class PodSetInfo:
    """What Kueue's admission adds to the pods: the assigned flavors' node labels and
    tolerations, and what admission checks asked for."""

    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    # Where Kueue's Topology Aware Scheduling put each pod (spec.placement), if it did.
    topology: TopologyAssignment | None = None


def workload_name(job: Job) -> str:
    prefix = f"{KIND.lower()}-{job.ref.name}"[:_PREFIX_MAX]
    digest = hashlib.sha256(f"{job.ref.name}/{job.ref.uid}/{KIND}".encode()).hexdigest()
    return f"{prefix}-{digest[:5]}"


def build_workload(
    job: Job, desired: DesiredState, priority: PriorityClass | None
) -> dict[str, Any]:
    """The Workload for `job`: queued where its label says, owned by the job (it goes
    with it), asking for its pods' resources."""
    assert job.queue_name is not None
    pod = desired.pods[0]
    template = {
        "metadata": {
            k: v for k, v in pod["metadata"].items() if k in ("labels", "annotations") and v
        },
        "spec": pod["spec"],
    }
    pod_set: dict[str, Any] = {"name": kueue.POD_SET, "count": len(desired.pods)}
    if job.spec.placement is not None:  # Kueue's Topology Aware Scheduling places it
        pod_set["topologyRequest"] = topology_request(job.spec.placement)
    spec: dict[str, Any] = {
        "queueName": job.queue_name,
        "podSets": [{**pod_set, "template": template}],
    }
    if priority is not None:
        spec["priorityClassRef"] = {
            "group": kueue.GROUP,
            "kind": "WorkloadPriorityClass",
            "name": priority.name,
        }
        spec["priority"] = priority.value
    return {
        "apiVersion": kueue.API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job),
            "namespace": job.ref.namespace,
            "labels": {kueue.JOB_UID_LABEL: job.ref.uid, names.LABEL_JOB_NAME: job.ref.name},
            "ownerReferences": owner_references(job),
            # As Kueue's job framework makes Workloads (jobframework.NewWorkload): the
            # Workload stays while its job may use the quota; the operator drops the
            # finalizer once the job finished or was deleted (policy/steps/queueing.py).
            "finalizers": [kueue.RESOURCE_IN_USE_FINALIZER],
        },
        "spec": spec,
    }


def admitted_pods(desired: DesiredState, info: PodSetInfo) -> DesiredState:
    """`desired` with Kueue's admission applied to every pod. A node label the pod
    template already sets to another value is a conflict no retry fixes."""
    pods = []
    for pod in desired.pods:
        pod = copy.deepcopy(pod)
        spec, meta = pod["spec"], pod["metadata"]
        selector = dict(spec.get("nodeSelector") or {})
        domain = info.topology.domain_of(replica_index(pod)) if info.topology else None
        for key, value in {**info.node_selector, **(domain or {})}.items():
            if key in selector and selector[key] != value:
                raise PlanError(
                    f"spec.template.spec.nodeSelector[{key}]",
                    f"is {selector[key]!r}, but Kueue admitted the job on a flavor with "
                    f"{key}={value!r}; remove it or queue the job where that flavor is used",
                )
            selector[key] = value
        if selector:
            spec["nodeSelector"] = selector
        tolerations = list(spec.get("tolerations") or [])
        tolerations += [dict(t) for t in info.tolerations if t not in tolerations]
        if tolerations:
            spec["tolerations"] = tolerations
        meta["labels"] = {**info.labels, **meta.get("labels", {})}
        if info.annotations:
            meta["annotations"] = {**info.annotations, **meta.get("annotations", {})}
        pods.append(pod)
    return DesiredState(desired.service, tuple(pods), desired.world_size)

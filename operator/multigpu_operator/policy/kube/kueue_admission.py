"""Where a queued job stands in Kueue, read from its Workload (pure).

Kueue writes its decisions as the Workload's conditions: QuotaReserved and Admitted
once it admits the job (with the flavors of each resource in status.admission),
Evicted when it takes the admission back (preemption by a higher-priority job,
a pods-ready timeout, ...), Finished once the operator says the job ended.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from multigpu_operator.api import kueue
from multigpu_operator.api.kueue_topology import topology_assignment
from multigpu_operator.plan.workload import PodSetInfo


class Queued(enum.StrEnum):
    NO_WORKLOAD = "NoWorkload"  # not created yet (the next pass creates it)
    PENDING = "Pending"  # waiting for quota or admission checks
    ADMITTED = "Admitted"
    EVICTED = "Evicted"
    FINISHED = "Finished"


@dataclass(frozen=True)
class Admission:
    state: Queued
    reason: str = ""  # Kueue's reason, e.g. Preempted, Pending, Inadmissible
    message: str = ""  # Kueue's message, e.g. why the quota does not suffice
    cluster_queue: str = ""
    info: PodSetInfo = field(default_factory=lambda: PodSetInfo({}, (), {}, {}))


def admission_of(
    workload: Mapping[str, Any] | None, flavors: Mapping[str, Mapping[str, Any]]
) -> Admission:
    """The job's standing from its Workload and the ResourceFlavors (by name)."""
    if workload is None:
        return Admission(Queued.NO_WORKLOAD, message="creating its Kueue Workload")
    workload_status = workload.get("status") or {}
    conditions = {c["type"]: c for c in workload_status.get("conditions") or []}

    def holds(ctype: str) -> bool:
        return bool(conditions.get(ctype, {}).get("status") == "True")

    if holds(kueue.FINISHED):
        return Admission(Queued.FINISHED, *_why(conditions[kueue.FINISHED]))
    if holds(kueue.EVICTED):
        return Admission(Queued.EVICTED, *_why(conditions[kueue.EVICTED]))
    admission = workload_status.get("admission") or {}
    if holds(kueue.ADMITTED) and admission:
        return Admission(
            Queued.ADMITTED,
            *_why(conditions[kueue.ADMITTED]),
            cluster_queue=str(admission.get("clusterQueue", "")),
            info=_pod_set_info(workload, admission, flavors),
        )
    pending = conditions.get(kueue.QUOTA_RESERVED) or conditions.get(kueue.ADMITTED)
    if pending is None:
        return Admission(Queued.PENDING, "Pending", "waiting for Kueue to look at it")
    return Admission(Queued.PENDING, *_why(pending))


def _why(condition: Mapping[str, Any]) -> tuple[str, str]:
    """A condition's reason and message."""
    return str(condition.get("reason", "")), str(condition.get("message", ""))


def _pod_set_info(
    workload: Mapping[str, Any],
    admission: Mapping[str, Any],
    flavors: Mapping[str, Mapping[str, Any]],
) -> PodSetInfo:
    """Node labels and tolerations of the flavors assigned to the pod set, merged with
    what admission checks asked for (podSetUpdates), as Kueue's job integrations do, and
    its topology assignment (api/kueue_topology.py)."""
    selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    topology = None
    for assignment in admission.get("podSetAssignments") or []:
        if assignment.get("name") != kueue.POD_SET:
            continue
        topology = topology_assignment(assignment.get("topologyAssignment"))
        for flavor_name in dict.fromkeys((assignment.get("flavors") or {}).values()):
            flavor = (flavors.get(flavor_name) or {}).get("spec") or {}
            selector.update(flavor.get("nodeLabels") or {})
            for toleration in flavor.get("tolerations") or []:
                if toleration not in tolerations:
                    tolerations.append(dict(toleration))
    for check in (workload.get("status") or {}).get("admissionChecks") or []:
        for update in check.get("podSetUpdates") or []:
            if update.get("name") != kueue.POD_SET:
                continue
            selector.update(update.get("nodeSelector") or {})
            labels.update(update.get("labels") or {})
            annotations.update(update.get("annotations") or {})
            tolerations += [
                dict(t) for t in update.get("tolerations") or [] if t not in tolerations
            ]
    return PodSetInfo(selector, tuple(tolerations), labels, annotations, topology)

"""The domains of a topology level as one job sees them (pure): how many of its pods each
could ever hold, and how many it holds now.

"Ever" counts the nodes' allocatable resources, as policy/kube/fit.py judges "no node
can ever fit" (the nodes the pod may use by labels and lasting taints, less the avoided
ones). "Now" takes away what the operator's other pods and other workloads' bound pods hold
(occupancy.py); a pod bound after the caches last looked can still make a guess wrong,
which the scheduler's refusal corrects (choice.py, placed.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from multigpu_operator.policy.kube.fit import allocatable, pod_requests, usable_nodes
from multigpu_operator.policy.placement.occupancy import Occupancy

Node = Mapping[str, Any]


@dataclass(frozen=True)
class Domain:
    name: str  # the value of the topology label
    ever: int  # the job's pods it could hold running nothing else
    now: int  # the job's pods it could hold now (as far as the operator knows)
    resource_total: Decimal  # the GPUs (the job's resource) its nodes have
    busy: bool  # another job's pods run or wait there (spec.placement.exclusive)
    exclusive: bool  # another job holds it exclusively: nothing else goes there


def domains_of(
    pod: Mapping[str, Any],
    nodes: Sequence[Node],
    key: str,
    resource: str,
    avoided: Sequence[str] = (),
    occupancy: Occupancy | None = None,
) -> list[Domain]:
    """The domains of level `key` that `pod` (one of the job's alike pods) may use, by
    name; nodes without the label, the pod may not use, or `avoided`, are left out."""
    occupancy = occupancy or Occupancy()
    requests = job_requests(pod)
    per_pod = requests.get(resource, Decimal(0))
    grouped: dict[str, list[Node]] = {}
    for node in usable_nodes(pod, nodes):
        meta = node["metadata"]
        value = (meta.get("labels") or {}).get(key)
        if value is not None and meta["name"] not in avoided:
            grouped.setdefault(str(value), []).append(node)
    out = []
    for name in sorted(grouped):
        ever = now = 0
        total = Decimal(0)
        for node in grouped[name]:
            room = allocatable(node)
            total += room.get(resource, Decimal(0))
            ever += _copies(room, requests)
            now += room_now(node, requests, occupancy)
        waiting = occupancy.pinned.get(name, Decimal(0))
        if waiting and per_pod:
            now = max(now - int(-(-waiting // per_pod)), 0)  # their pods, rounded up
        if name in occupancy.full:
            now = 0
        held = name in occupancy.exclusive
        out.append(Domain(name, ever, now, total, name in occupancy.busy, held))
    return out


def room_now(
    node: Node, requests: Mapping[str, Decimal], occupancy: Occupancy, *, own: bool = True
) -> int:
    """The pods asking for `requests` that `node` holds now, as far as the operator knows
    (with the job's own pods there counted when `own`)."""
    used = occupancy.held(node, own=own)
    free = {r: q - used.get(r, Decimal(0)) for r, q in allocatable(node).items()}
    return _copies(free, requests)


def job_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one of the job's alike pods asks for (the resources it asks any of)."""
    return {r: q for r, q in pod_requests(pod.get("spec") or {}).items() if q > 0}


def _copies(room: Mapping[str, Decimal], requests: Mapping[str, Decimal]) -> int:
    if not requests:
        return 1_000_000  # asks for nothing: any number
    return max(min(int(room.get(r, Decimal(0)) // q) for r, q in requests.items()), 0)

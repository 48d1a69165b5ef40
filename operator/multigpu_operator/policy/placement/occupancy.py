"""What the cluster's other pods hold, by node and by domain (pure): the "now" of a
domain choice (domains.py).

Read from the pod informer's pods of every job (trimmed: our labels, the resources, the
node): a scheduled pod that has not finished holds its requests on its node; a pod pinned
to a domain (label LABEL_DOMAIN) that is not scheduled yet holds its GPUs in that domain;
a pod given a node (label LABEL_HOST: hosts.py; nodeSelector kubernetes.io/hostname:
Kueue's topology assignment) and not scheduled yet holds its requests on that node; a pod with
LABEL_EXCLUSIVE keeps its domain to its job; a pinned pod the scheduler turned away says
its domain is full now. Other workloads' pods come as what they hold by node
(`foreign`, cluster/foreign_pods.py: bound and not finished), added to the same count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from multigpu_operator.api.placement import (
    HOSTNAME_LABEL,
    LABEL_DOMAIN,
    LABEL_EXCLUSIVE,
    LABEL_HOST,
)
from multigpu_operator.policy.kube.fit import pod_requests

_FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Occupancy:
    # node -> resource -> what scheduled pods hold there
    used: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    # domain -> GPUs (any resource name with a "/": extended resources) of pods pinned
    # there and not scheduled yet
    pinned: Mapping[str, Decimal] = field(default_factory=dict)
    busy: frozenset[str] = frozenset()  # domains where other jobs' pods are pinned
    exclusive: frozenset[str] = frozenset()  # domains held by an exclusive job
    # Domains where the scheduler turned another job's pod away: full now, whatever the
    # operator's count says (other workloads' pods it cannot read, a pod bound since).
    full: frozenset[str] = frozenset()
    # hostname label -> resource -> what pods given that node and not scheduled yet hold
    # there (their domain's `pinned` leaves them out)
    on_host: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    # What the job's own pods hold of `used` and `on_host`, keyed alike: the nodes its
    # pods are given in rank order leave them out (hosts.py), so that pods created over
    # several passes (names freed one by one) get the same order.
    own_used: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    own_on_host: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)

    def held(self, node: Mapping[str, Any], *, own: bool = True) -> Mapping[str, Decimal]:
        """What the pods bound or given to `node` hold there; without the job's own
        pods when `own` is False."""
        name = node["metadata"]["name"]
        host = (node["metadata"].get("labels") or {}).get(HOSTNAME_LABEL, "")
        total: dict[str, Decimal] = {}
        parts = [(self.used.get(name, {}), 1), (self.on_host.get(host, {}), 1)]
        if not own:
            parts += [(self.own_used.get(name, {}), -1), (self.own_on_host.get(host, {}), -1)]
        for part, sign in parts:
            for r, q in part.items():
                total[r] = total.get(r, Decimal(0)) + sign * q
        return total


def occupancy(
    pods: Iterable[Mapping[str, Any]],
    own_uid: str,
    foreign: Mapping[str, Mapping[str, Decimal]] | None = None,
) -> Occupancy:
    """What the operator's pods and other workloads' (`foreign`: node -> resource -> held)
    hold; the pods of the job of `own_uid` count as taking room (an elastic job grows
    into what is left) but never make a domain busy."""
    used: dict[str, dict[str, Decimal]] = {
        node: dict(held) for node, held in (foreign or {}).items()
    }
    pinned: dict[str, Decimal] = {}
    busy: set[str] = set()
    exclusive: set[str] = set()
    full: set[str] = set()
    on_host: dict[str, dict[str, Decimal]] = {}
    own_used: dict[str, dict[str, Decimal]] = {}
    own_on_host: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        own = any(ref.get("uid") == own_uid for ref in meta.get("ownerReferences") or ())
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in _FINISHED:
            continue
        labels = meta.get("labels") or {}
        domain = labels.get(LABEL_DOMAIN)
        if domain and not own:
            busy.add(domain)
            if labels.get(LABEL_EXCLUSIVE) == "true":
                exclusive.add(domain)
        spec = pod.get("spec") or {}
        requests = pod_requests(spec)
        node = spec.get("nodeName")
        host = labels.get(LABEL_HOST) or (spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL)
        if node or host:
            where = str(node or host)
            counts = [used if node else on_host]
            if own:
                counts.append(own_used if node else own_on_host)
            for count in counts:
                held = count.setdefault(where, {})
                for resource, amount in requests.items():
                    held[resource] = held.get(resource, Decimal(0)) + amount
            if not node and domain and not own and _turned_away(pod):
                full.add(domain)
        elif domain:
            gpus = sum((q for r, q in requests.items() if "/" in r), Decimal(0))
            pinned[domain] = pinned.get(domain, Decimal(0)) + gpus
            if not own and _turned_away(pod):
                full.add(domain)
    return Occupancy(
        used,
        pinned,
        frozenset(busy),
        frozenset(exclusive),
        frozenset(full),
        on_host,
        own_used,
        own_on_host,
    )


def _turned_away(pod: Mapping[str, Any]) -> bool:
    """Whether the scheduler reported the pod Unschedulable."""
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )

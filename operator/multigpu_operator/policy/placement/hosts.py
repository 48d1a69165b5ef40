"""Which node each of a job's pods goes to inside its domains, in rank order (pure).

Inside a chosen domain the pods fill the fewest domains of each finer level that
spec.placement.rankOrder lists, coarsest first, then the fewest nodes (the largest
first, the last the tightest that holds the rest, as the domain choice does), and the
replica indexes follow that order, each level's domains by name: neighbouring ranks
share a node, then the finest level, and so on, the order NCCL's rings and trees
benefit from. Equal nodes are ordered by a hash of the job's uid and their name, so that
jobs decided at the same moment ask for different ones where the domain has room to spare.

Each pod asks for its node with a preferred node affinity (weight 100: the scheduler's
node-affinity score outweighs its others) and the label LABEL_HOST, by which other jobs'
choices count it there before it is scheduled. Preferred, not required: jobs decided at
the same moment can pick the same free node before either's pods are seen, and a node
taken meanwhile must leave the pod to the scheduler inside its domain (the rank order
bent) rather than turn it away (the job moved to another domain).

The job's own pods are left out of what a node holds: a new attempt's pods are created
as the old ones' names free up, over several passes, and each pass must give replica `i`
the same node. Only in a domain that holds all its pods now (as far as the operator
knows): in one that waits for room, the scheduler places them when room frees. Not for
Elastic jobs, whose ranks torchrun's rendezvous gives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.placement import HOSTNAME_LABEL, Placement
from multigpu_operator.policy.kube.fit import usable_nodes
from multigpu_operator.policy.placement.choice import Assignment, fewest
from multigpu_operator.policy.placement.domains import job_requests, room_now
from multigpu_operator.policy.placement.occupancy import Occupancy

Node = Mapping[str, Any]


@dataclass(frozen=True)
class Member:
    """A node of a domain: its labels and the job's pods it holds now."""

    labels: Mapping[str, str]
    room: int


def hosts(
    pod: Mapping[str, Any],
    nodes: Sequence[Node],
    placement: Placement,
    assigned: Assignment,
    occupancy: Occupancy,
    avoided: Sequence[str] = (),
    salt: str | None = None,
) -> tuple[str | None, ...]:
    """The node (its hostname label) of each replica index of a job whose domains are
    `assigned`; None for a pod left to the scheduler inside its domain. `salt` (the job's
    uid) breaks ties between equal nodes differently for each job (else by name)."""
    requests = job_requests(pod)
    key = placement.topology_key
    by_domain: dict[str, list[Member]] = {}
    for node in usable_nodes(pod, nodes):
        labels = node["metadata"].get("labels") or {}
        if node["metadata"]["name"] in avoided or HOSTNAME_LABEL not in labels:
            continue
        if key in labels:
            room = room_now(node, requests, occupancy, own=False)
            by_domain.setdefault(str(labels[key]), []).append(Member(labels, room))
    levels, tie = tuple(placement.rank_order or ()), _tie(salt)
    out: list[str | None] = []
    for domain, pods in assigned:
        filled = _fill(by_domain.get(domain, []), pods, levels, tie)
        out += filled if len(filled) == pods else [None] * pods
    return tuple(out)


def _tie(salt: str | None) -> Callable[[str], str]:
    """How equal nodes are ordered: by name, or by a hash of the job's salt and the name.
    Jobs decided at the same moment see the same free nodes; ordered alike, they would
    all ask for the same ones."""
    if salt is None:
        return str
    return lambda name: hashlib.sha256(f"{salt}/{name}".encode()).hexdigest()


def _fill(
    members: Sequence[Member], pods: int, levels: tuple[str, ...], tie: Callable[[str], str]
) -> list[str | None]:
    """The hostnames of `pods` pods in rank order over `members`: the fewest domains of
    `levels[0]` (then of the rest), then the fewest nodes (equal ones by `tie`); [] when
    they hold fewer."""
    key = levels[0] if levels else HOSTNAME_LABEL
    groups: dict[str, list[Member]] = {}
    for member in members:
        groups.setdefault(str(member.labels.get(key, "")), []).append(member)
    rooms = {name: sum(m.room for m in group) for name, group in groups.items()}
    chosen, left = fewest(rooms, pods, tie if not levels else str)
    if left:
        return []
    out: list[str | None] = []
    for name, n in sorted(chosen):
        out += _fill(groups[name], n, levels[1:], tie) if levels else [name] * n
    return out

"""A job's placement in this pass (pure): the choice recorded in status.placement when it
still stands, else a new one (choice.py); and the pods pinned to it.

Level-triggered: the status records the domains in rank order and those tried, so every
pass reproduces the placement from the status and the nodes; the operator remembers
nothing. A recorded choice stands while its domains could still hold their pods; an
elastic job's change of size keeps its domains (choice.grown).

A pod is pinned with a required node affinity `<topologyKey> In [<domain>]` added to
every term of the template's own required node affinity (terms are ORed), asks for its
node in rank order where its domain holds the job now (hosts.py: a preferred node
affinity and the label LABEL_HOST), and is labelled with its domain (LABEL_DOMAIN, read
back by other jobs' choices: occupancy.py). An exclusive job's pods also carry a required
pod anti-affinity against other jobs' pods over the level, which the scheduler applies
both ways.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from multigpu_operator.api.kueue_topology import TopologyAssignment
from multigpu_operator.api.names import LABEL_JOB_NAME
from multigpu_operator.api.placement import (
    HOSTNAME_LABEL,
    LABEL_DOMAIN,
    LABEL_EXCLUSIVE,
    LABEL_HOST,
    DomainPods,
    Placement,
    PlacementStatus,
    level_name,
)
from multigpu_operator.api.pod_labels import replica_index
from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.api.status import JobStatus
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.kube.fit import pod_requests
from multigpu_operator.policy.placement.choice import Assignment, Choice, choose, grown
from multigpu_operator.policy.placement.domains import Domain, domains_of
from multigpu_operator.policy.placement.hosts import hosts
from multigpu_operator.policy.placement.occupancy import Occupancy


@dataclass(frozen=True)
class Placed:
    placement: Placement
    choice: Choice
    # The choice differs from the one the status records (made or changed in this pass).
    changed: bool
    # Domains other than the chosen ones that hold the job now and were not tried.
    alternatives: tuple[str, ...] = ()
    # Works out the node of each replica index (hosts.py), in a pass that creates pods.
    nodes_given: Callable[[], tuple[str | None, ...]] | None = field(
        default=None, compare=False, repr=False
    )

    @cached_property
    def hosts(self) -> tuple[str | None, ...]:
        """The node (hostname label) of each replica index, in rank order; None or
        missing: left to the scheduler inside its domain."""
        return self.nodes_given() if self.nodes_given else ()

    def domain_of(self, index: int) -> str | None:
        """The domain of replica `index` (ranks in the order of the domains)."""
        first = 0
        for name, pods in self.choice.domains:
            if first <= index < first + pods:
                return name
            first += pods
        return None

    def summary(self) -> str:
        level = level_name(self.placement.topology_key)
        return ", ".join(
            f"{level} {name} ({n} pod{'' if n == 1 else 's'})" for name, n in self.choice.domains
        )

    def status(self) -> PlacementStatus:
        """status.placement for this choice."""
        chosen = self.choice.domains
        fields: dict[str, Any] = {"topology_key": self.placement.topology_key}
        if chosen:
            fields["domains"] = [DomainPods(name=n, pods=p) for n, p in chosen]
            fields["summary"] = self.summary()
        if self.choice.tried:
            fields["tried"] = list(self.choice.tried)
        return PlacementStatus(**fields)

    def given_up(self) -> PlacementStatus:
        """status.placement once the chosen domains are given up (the gang did not start
        there): none chosen, those added to the tried ones."""
        tried = [*self.choice.tried, *(n for n, _ in self.choice.domains)]
        return PlacementStatus(topology_key=self.placement.topology_key, tried=tried[-32:])

    def pin(self, pod: Mapping[str, Any], job_name: str) -> dict[str, Any]:
        """`pod` pinned to its domain, asking for its node when it has one (a copy); a
        pod of no domain is left as it is."""
        index = replica_index(pod)
        domain = self.domain_of(index)
        if domain is None:
            return dict(pod)
        key = self.placement.topology_key
        out = copy.deepcopy(dict(pod))
        labels = out.setdefault("metadata", {}).setdefault("labels", {})
        labels[LABEL_DOMAIN] = domain
        spec = out.setdefault("spec", {})
        affinity = spec.setdefault("affinity", {})
        node = affinity.setdefault("nodeAffinity", {})
        required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        expression = {"key": key, "operator": "In", "values": [domain]}
        terms = required.get("nodeSelectorTerms") or [{}]
        required["nodeSelectorTerms"] = [
            {**t, "matchExpressions": [*(t.get("matchExpressions") or []), expression]}
            for t in terms
        ]
        host = self.hosts[index] if index < len(self.hosts) else None
        if host is not None:
            labels[LABEL_HOST] = host
            prefer = {"key": HOSTNAME_LABEL, "operator": "In", "values": [host]}
            preferred = node.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
            preferred.append({"weight": 100, "preference": {"matchExpressions": [prefer]}})
        if self.placement.exclusive:
            labels[LABEL_EXCLUSIVE] = "true"
            others = {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": LABEL_JOB_NAME, "operator": "Exists"},
                        {"key": LABEL_JOB_NAME, "operator": "NotIn", "values": [job_name]},
                    ]
                },
                "topologyKey": key,
            }
            anti = affinity.setdefault("podAntiAffinity", {})
            listed = anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
            listed.append(others)
        return out


def placed(
    job: Job,
    desired: DesiredState,
    previous: JobStatus,
    nodes: Sequence[Mapping[str, Any]],
    occupancy: Occupancy | None = None,
    avoided: Sequence[str] = (),
) -> Placed | None:
    """The job's placement this pass; None without spec.placement, without pods, or
    with neither nodes known nor a choice recorded."""
    placement = job.spec.placement
    if placement is None or not desired.pods:
        return None
    pods = len(desired.pods)
    pod = desired.pods[0]
    resource = job.spec.gpu_resource
    per_pod = pod_requests(pod.get("spec") or {}).get(resource, Decimal(0))
    domains = domains_of(pod, nodes, placement.topology_key, resource, avoided, occupancy)
    recorded = previous.placement
    same = recorded is not None and recorded.topology_key == placement.topology_key
    tried = tuple(recorded.tried or ()) if recorded is not None and same else ()
    assigned: Assignment = ()
    if recorded is not None and same and recorded.domains:
        assigned = tuple((d.name, d.pods) for d in recorded.domains)
    if assigned and (not nodes or _stands(assigned, domains)):
        if sum(n for _, n in assigned) == pods:
            choice = Choice(assigned, tried=tried)
        else:
            choice = grown(placement, assigned, pods, domains)
            choice = Choice(choice.domains, choice.never, choice.waits, tried, choice.note)
    elif not nodes:
        return None
    else:
        choice = choose(placement, pods, per_pod, resource, domains, tried)
    chosen = {n for n, _ in choice.domains}
    alternatives = tuple(
        d.name
        for d in domains
        if d.now >= pods
        and not (placement.exclusive and d.busy)
        and d.name not in chosen
        and d.name not in tried
    )
    if job.spec.mode is Mode.ELASTIC or not choice.domains:
        return Placed(placement, choice, choice.domains != assigned, alternatives)
    held, avoid = occupancy or Occupancy(), tuple(avoided)
    return Placed(
        placement,
        choice,
        choice.domains != assigned,
        alternatives,
        lambda: hosts(pod, nodes, placement, choice.domains, held, avoid, job.ref.uid or None),
    )


def admitted(
    job: Job,
    previous: JobStatus,
    topology: TopologyAssignment | None,
    nodes: Sequence[Mapping[str, Any]] = (),
) -> Placed | None:
    """A queued job's placement: where Kueue's topology assignment put its pods, counted
    by domain of spec.placement's level in Kueue's order; None without either. Kueue may
    name only the lowest level (the host): the level's value is then the nodes' label."""
    placement = job.spec.placement
    if placement is None or topology is None:
        return None
    key = placement.topology_key
    domains: list[tuple[str, int]] = []
    for values, pods in topology.domains:
        labels = dict(zip(topology.levels, values, strict=True))
        value = labels.get(key) or _label_of(nodes, labels, key)
        if value is None:
            return None
        if domains and domains[-1][0] == value:
            domains[-1] = (value, domains[-1][1] + pods)
        else:
            domains.append((value, pods))
    recorded = previous.placement
    before = tuple((d.name, d.pods) for d in (recorded.domains or ())) if recorded else ()
    chosen = tuple(domains)
    return Placed(placement, Choice(chosen), chosen != before)


def _label_of(
    nodes: Sequence[Mapping[str, Any]], labels: Mapping[str, str], key: str
) -> str | None:
    """`key`'s value on the first node that has all of `labels`."""
    for node in nodes:
        have = node["metadata"].get("labels") or {}
        if key in have and all(have.get(k) == v for k, v in labels.items()):
            return str(have[key])
    return None


def _stands(assigned: Assignment, domains: Sequence[Domain]) -> bool:
    """Whether each recorded domain still exists for the job (its pods that cannot start
    there are moved after the gang timeout: policy/steps/placement.py)."""
    names = {d.name for d in domains}
    return all(name in names for name, _ in assigned)

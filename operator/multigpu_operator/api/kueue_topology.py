"""Kueue's Topology Aware Scheduling as the operator uses it (kueue.x-k8s.io/v1beta2): the
topology request of a job's pod set, and the topology assignment of its admission.

A job with spec.placement asks Kueue for its level: `topologyRequest.required` (or
`preferred`) is spec.placement.topologyKey, which must be a level of the Topology that
the ClusterQueue's ResourceFlavor names (`spec.topologyName`). Kueue admits the job into
domains and writes them in `status.admission.podSetAssignments[].topologyAssignment`:
the levels from the requested one down to the Topology's lowest (often
kubernetes.io/hostname), and slices of domains with their pod counts. The operator pins
pod i to the i-th place of that list (podIndexLabel is the replica index), as Kueue's
own topology ungater does for the job kinds it runs, so ranks follow Kueue's order.
docs/placement.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.names import LABEL_REPLICA_INDEX
from multigpu_operator.api.placement import Placement, PlacementPolicy


@dataclass(frozen=True)
class TopologyAssignment:
    levels: tuple[str, ...]  # node label keys, the highest first
    # Each domain: its value at every level, and its pods, in Kueue's order.
    domains: tuple[tuple[tuple[str, ...], int], ...]

    def domain_of(self, index: int) -> Mapping[str, str] | None:
        """The node labels of the domain of replica `index`."""
        first = 0
        for values, pods in self.domains:
            if first <= index < first + pods:
                return dict(zip(self.levels, values, strict=True))
            first += pods
        return None


def topology_request(placement: Placement) -> dict[str, str]:
    """The pod set's topologyRequest for `placement`."""
    key = "required" if placement.policy is PlacementPolicy.REQUIRED else "preferred"
    return {key: placement.topology_key, "podIndexLabel": LABEL_REPLICA_INDEX}


def topology_assignment(raw: Mapping[str, Any] | None) -> TopologyAssignment | None:
    """A pod set assignment's topologyAssignment, its slices expanded; None when absent."""
    if not raw or not raw.get("levels"):
        return None
    levels = tuple(str(level) for level in raw["levels"])
    domains: list[tuple[tuple[str, ...], int]] = []
    for piece in raw.get("slices") or []:
        count = int(piece.get("domainCount") or 0)
        per_level = [_values(v, count) for v in piece.get("valuesPerLevel") or []]
        pods = piece.get("podCounts") or {}
        if pods.get("individual"):
            counts = [int(n) for n in pods["individual"]]
        else:
            counts = [int(pods.get("universal") or 0)] * count
        for i in range(count):
            domains.append((tuple(values[i] for values in per_level), counts[i]))
    return TopologyAssignment(levels, tuple(domains))


def _values(level: Mapping[str, Any], count: int) -> list[str]:
    if level.get("universal") is not None:
        return [str(level["universal"])] * count
    individual = level.get("individual") or {}
    prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
    return [f"{prefix}{root}{suffix}" for root in individual.get("roots") or []]

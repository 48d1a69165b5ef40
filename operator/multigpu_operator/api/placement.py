"""spec.placement and status.placement: a job's pods placed by network topology.

A topology level is a node label key (a zone, a rack or block label the cluster sets,
nvidia.com/gpu.clique for an NVLink domain, kubernetes.io/hostname); a domain is one value
of it. The operator chooses the domain (policy/placement.py) and pins the pods there with
a required node affinity; the status records the choice, so that every later pass
reproduces it from the status and what it observes. docs/placement.md has the examples.
"""

from __future__ import annotations

import enum
from typing import Annotated

from pydantic import Field

from multigpu_operator.api.base import ApiModel, Int32, StatusModel
from multigpu_operator.api.rule import Rule

# A qualified label key (an optional DNS-subdomain prefix, then a name of at most 63).
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
# On a pinned pod: the domain it is pinned to, and "true" when its job holds the domain
# exclusively (the operator's other jobs read them to see what is taken:
# policy/placement/occupancy.py).
LABEL_DOMAIN = "multigpu.dev/topology-domain"
# On a pod given a node in rank order: that node's kubernetes.io/hostname (a label value
# already), so that other jobs' choices count the pod there before it is scheduled.
LABEL_HOST = "multigpu.dev/topology-host"
LABEL_EXCLUSIVE = "multigpu.dev/topology-exclusive"
# The finer levels spec.placement.rankOrder may name.
MAX_RANK_LEVELS = 4
# The node level, by which each pod is given its node (policy/placement/hosts.py).
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The domains status.placement keeps: those of the choice, and those tried before.
MAX_DOMAINS_KEPT = 32
# Names of well-known levels in messages ("needs 32 nvidia.com/gpu in one rack").
_LEVEL_NAMES = {
    "kubernetes.io/hostname": "node",
    "topology.kubernetes.io/zone": "zone",
    "nvidia.com/gpu.clique": "NVLink clique",
}


# A node label key as a field holds it (bounded, so that the API server can cost its
# CEL rules).
LabelKey = Annotated[str, Field(min_length=1, max_length=317)]


class PlacementPolicy(enum.StrEnum):
    REQUIRED = "Required"
    PREFERRED = "Preferred"


class Placement(ApiModel):
    """Where the job's pods run, by network topology: all of them in one domain of a
    level (one rack, one NVLink clique, one zone), chosen by the operator among those
    that hold the whole job now, with ranks in the order of the domains. A job no domain
    can ever hold says so at once (status.reason NoDomainFits). docs/placement.md."""

    topology_key: str = Field(
        min_length=1,
        max_length=317,
        description=(
            "The topology level: a node label key whose values name the domains, e.g. "
            "topology.kubernetes.io/zone, a rack or block label such as "
            "cloud.google.com/gce-topology-block or topology.k8s.aws/network-node-layer-3, "
            "nvidia.com/gpu.clique (an NVLink domain) or kubernetes.io/hostname. Nodes "
            "without the label are not used. Immutable."
        ),
    )
    policy: PlacementPolicy = Field(
        PlacementPolicy.REQUIRED,
        description=(
            "Required (the default): every pod in one domain; a job that no domain can "
            "hold now waits, and one that no domain could ever hold is told so at once "
            "(reason NoDomainFits). Preferred: one domain when one holds the job now, else "
            "the fewest domains that do."
        ),
    )
    rank_order: list[LabelKey] | None = Field(
        None,
        max_length=MAX_RANK_LEVELS,
        description=(
            "Finer levels inside the domain, coarsest first: node label keys such as a rack "
            "label under a block level. The pods of a domain fill the fewest domains of each "
            "of these levels in turn, then the fewest nodes, and the replica indexes (ranks) "
            "follow that order, so that neighbouring ranks share a node, then the finest of "
            "these levels, and so on; each pod asks for its node (a preferred node "
            "affinity: a node taken meanwhile leaves the pod to the scheduler inside its "
            "domain). Unset: nodes only. "
            "Elastic jobs get their ranks from torchrun's rendezvous, and a job Kueue "
            "places follows Kueue's Topology, so neither reads it."
        ),
    )
    exclusive: bool = Field(
        False,
        description=(
            "true: the domain runs no other job's pods (of this operator) while the job "
            "runs: the operator chooses a domain without them, and the pods carry a "
            "required pod anti-affinity that keeps other jobs' pods out. Needs policy "
            "Required. Default false."
        ),
    )


class DomainPods(StatusModel):
    """One domain of a job's placement and its pods."""

    name: str = Field(description="The domain: the value of the topology label.")
    pods: Int32 = Field(ge=0, description="Pods pinned to it: the next replica indexes in order.")


class PlacementStatus(StatusModel):
    """The placement the job got: the level, the domains in rank order and their pods."""

    topology_key: str = Field(description="spec.placement.topologyKey when it was chosen.")
    domains: list[DomainPods] | None = Field(
        None,
        max_length=MAX_DOMAINS_KEPT,
        description=(
            "The chosen domains, in rank order: the first `pods` replica indexes go to the "
            "first, the next to the second. Absent while none is chosen."
        ),
    )
    summary: str | None = Field(
        None, description='The domains and their pods in one line, e.g. "rack-a3 (4 pods)".'
    )
    tried: list[str] | None = Field(
        None,
        max_length=MAX_DOMAINS_KEPT,
        description=(
            "Domains given up after the gang did not start there within gang.timeoutSeconds; "
            "not chosen again until every domain that could hold the job was tried."
        ),
    )


def level_name(topology_key: str) -> str:
    """The level as messages name it: "rack" for example.com/rack."""
    return _LEVEL_NAMES.get(topology_key, topology_key.rsplit("/", 1)[-1])


MSG_PLACEMENT_KEY = (
    "spec.placement.topologyKey must be a node label key (an optional DNS-subdomain prefix "
    "and '/', then letters, digits, '-', '_' or '.', at most 63), e.g. "
    "topology.kubernetes.io/zone or nvidia.com/gpu.clique"
)
MSG_PLACEMENT_RANK_ORDER = (
    "spec.placement.rankOrder must list node label keys (as topologyKey), each once, finer "
    "than spec.placement.topologyKey and not it, coarsest first, e.g. "
    "[topology.example.com/rack] under a block level"
)
MSG_PLACEMENT_EXCLUSIVE = (
    "spec.placement.exclusive needs spec.placement.policy Required: a job that may spread "
    "over several domains cannot keep each of them to itself"
)
MSG_PLACEMENT_IMMUTABLE = (
    "spec.placement is immutable: the pods are pinned to the domain chosen for it; delete "
    "and re-create the job to change it"
)

_LABEL_KEY_CEL = LABEL_KEY.replace("\\", "\\\\")

# Attached to spec with the others of api/rules.py.
PLACEMENT_RULES: tuple[Rule, ...] = (
    Rule(
        cel=f"!has(self.placement) || self.placement.topologyKey.matches('{_LABEL_KEY_CEL}')",
        message=MSG_PLACEMENT_KEY,
        field_path=".placement.topologyKey",
    ),
    Rule(
        cel=(
            "!has(self.placement) || !has(self.placement.rankOrder) || "
            f"(self.placement.rankOrder.all(k, k.matches('{_LABEL_KEY_CEL}') && "
            "k != self.placement.topologyKey) && "
            "self.placement.rankOrder.all(k, self.placement.rankOrder.exists_one(o, o == k)))"
        ),
        message=MSG_PLACEMENT_RANK_ORDER,
        field_path=".placement.rankOrder",
    ),
    Rule(
        cel=(
            "!has(self.placement) || !self.placement.exclusive || "
            f"self.placement.policy == '{PlacementPolicy.REQUIRED}'"
        ),
        message=MSG_PLACEMENT_EXCLUSIVE,
        field_path=".placement.exclusive",
    ),
    Rule(
        cel=(
            "has(self.placement) == has(oldSelf.placement) && "
            "(!has(self.placement) || self.placement == oldSelf.placement)"
        ),
        message=MSG_PLACEMENT_IMMUTABLE,
        field_path=".placement",
    ),
)

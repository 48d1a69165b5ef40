"""Offline validation of spec.placement (api/placement.py): valid placements pass with
their defaults, and each invalid one is refused naming its field with the rule's message.
The transition rule (immutable) needs a stored object: tests/integration."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.placement import (
    MSG_PLACEMENT_EXCLUSIVE,
    MSG_PLACEMENT_KEY,
    MSG_PLACEMENT_RANK_ORDER,
    PLACEMENT_RULES,
    Placement,
    PlacementPolicy,
    level_name,
)
from multigpu_operator.api.spec import JobSpec
from multigpu_operator.api.validation import validate
from support.crd_specs import Refused, assert_refused, prop, refused_cases, spec, untested

VALID: list[tuple[str, dict[str, Any]]] = [
    ("rack", {"topologyKey": "example.com/rack"}),
    ("zone-preferred", {"topologyKey": "topology.kubernetes.io/zone", "policy": "Preferred"}),
    ("clique-exclusive", {"topologyKey": "nvidia.com/gpu.clique", "exclusive": True}),
    ("gke-block", {"topologyKey": "cloud.google.com/gce-topology-block"}),
    ("aws-layer", {"topologyKey": "topology.k8s.aws/network-node-layer-3"}),
    ("no-prefix", {"topologyKey": "rack"}),
    ("rank-order", {"topologyKey": "example.com/block", "rankOrder": ["example.com/rack"]}),
    (
        "rank-order-two",
        {"topologyKey": "zone", "rankOrder": ["example.com/block", "example.com/rack"]},
    ),
]


@pytest.mark.parametrize("placement", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid(placement: dict[str, Any]) -> None:
    assert validate(spec(placement=placement), "j") == []


def test_defaults() -> None:
    parsed = JobSpec.model_validate(spec(placement={"topologyKey": "example.com/rack"}))
    assert parsed.placement == Placement(topology_key="example.com/rack")
    assert parsed.placement.policy is PlacementPolicy.REQUIRED
    assert not parsed.placement.exclusive
    assert JobSpec.model_validate(spec()).placement is None


def test_explained() -> None:
    for field in ("topologyKey", "policy", "rankOrder", "exclusive"):
        assert prop(f"placement.{field}")["description"]
    assert prop("placement")["description"].startswith("Where the job's pods run")


FIELD = "spec.placement"
INVALID: list[Refused] = [
    (
        "key-spaces",
        spec(placement={"topologyKey": "my rack"}),
        "j",
        f"{FIELD}.topologyKey",
        MSG_PLACEMENT_KEY,
    ),
    (
        "key-two-slashes",
        spec(placement={"topologyKey": "a.com/b/c"}),
        "j",
        f"{FIELD}.topologyKey",
        MSG_PLACEMENT_KEY,
    ),
    (
        "exclusive-preferred",
        spec(placement={"topologyKey": "r", "policy": "Preferred", "exclusive": True}),
        "j",
        f"{FIELD}.exclusive",
        MSG_PLACEMENT_EXCLUSIVE,
    ),
    (
        "rank-order-not-a-key",
        spec(placement={"topologyKey": "block", "rankOrder": ["my rack"]}),
        "j",
        f"{FIELD}.rankOrder",
        MSG_PLACEMENT_RANK_ORDER,
    ),
    (
        "rank-order-the-level",
        spec(placement={"topologyKey": "block", "rankOrder": ["rack", "block"]}),
        "j",
        f"{FIELD}.rankOrder",
        MSG_PLACEMENT_RANK_ORDER,
    ),
    (
        "rank-order-twice",
        spec(placement={"topologyKey": "block", "rankOrder": ["rack", "rack"]}),
        "j",
        f"{FIELD}.rankOrder",
        MSG_PLACEMENT_RANK_ORDER,
    ),
    (
        "rank-order-too-long",
        spec(placement={"topologyKey": "zone", "rankOrder": ["a", "b", "c", "d", "e"]}),
        "j",
        f"{FIELD}.rankOrder",
        "is too long",
    ),
    ("key-missing", spec(placement={}), "j", f"{FIELD}.topologyKey", "required"),
    (
        "policy-unknown",
        spec(placement={"topologyKey": "r", "policy": "Maybe"}),
        "j",
        f"{FIELD}.policy",
        "is not one of",
    ),
]


@refused_cases(INVALID)
def test_invalid(raw: dict[str, Any], name: str, field: str, expected: str) -> None:
    assert_refused(raw, name, field, expected)


def test_every_rule_has_an_invalid_case() -> None:
    assert untested(PLACEMENT_RULES, {c[4] for c in INVALID}) == []


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("example.com/rack", "rack"),
        ("kubernetes.io/hostname", "node"),
        ("nvidia.com/gpu.clique", "NVLink clique"),
        ("topology.kubernetes.io/zone", "zone"),
        ("block", "block"),
    ],
)
def test_level_name(key: str, name: str) -> None:
    assert level_name(key) == name

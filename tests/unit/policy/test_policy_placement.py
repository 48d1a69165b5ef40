"""Domain choice by network topology (pure, policy/placement/): which domains a job's
pods go to, in rank order, on fragmented clusters; ties, exclusive, the preferred
fallback, never fits, avoided nodes, tried domains and elastic growth."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from multigpu_operator.api.placement import Placement
from multigpu_operator.policy.placement.choice import Choice, choose, grown
from multigpu_operator.policy.placement.domains import Domain, domains_of
from multigpu_operator.policy.placement.occupancy import Occupancy, occupancy
from support.policy import gpu_node

RACK = "example.com/rack"
GPU = "nvidia.com/gpu"
REQUIRED = Placement(topology_key=RACK)
PREFERRED = Placement(topology_key=RACK, policy="Preferred")
EXCLUSIVE = Placement(topology_key=RACK, exclusive=True)


def rack(name: str, now: int, ever: int = 4, *, busy: bool = False, held: bool = False) -> Domain:
    """A rack of `ever` 8-GPU nodes, `now` of them free."""
    return Domain(name, ever, now, Decimal(8 * ever), busy, held)


# (id, placement, pods, racks, tried, expected choice)
CHOICES: list[tuple[str, Placement, int, list[Domain], tuple[str, ...], Choice]] = [
    (
        "tightest-fit",
        REQUIRED,
        2,
        [rack("r1", 4), rack("r2", 2), rack("r3", 3)],
        (),
        Choice((("r2", 2),)),
    ),
    ("tie-by-name", REQUIRED, 2, [rack("r2", 3), rack("r1", 3)], (), Choice((("r1", 2),))),
    (
        "fragmented-waits-in-the-roomiest",
        REQUIRED,
        4,
        [rack("r1", 2), rack("r2", 3), rack("r3", 1)],
        (),
        Choice(
            (("r2", 4),),
            waits="no rack has room for 4 pods now; waiting in rack r2 (room for 3)",
        ),
    ),
    (
        "tried-skipped",
        REQUIRED,
        2,
        [rack("r1", 2), rack("r2", 4)],
        ("r1",),
        Choice((("r2", 2),), tried=("r1",)),
    ),
    (
        "all-tried-any-again-tried-kept",
        REQUIRED,
        2,
        [rack("r1", 2), rack("r2", 4)],
        ("r1", "r2"),
        Choice((("r1", 2),), tried=("r1", "r2")),
    ),
    (
        "exclusive-skips-busy",
        EXCLUSIVE,
        2,
        [rack("r1", 3, busy=True), rack("r2", 4)],
        (),
        Choice((("r2", 2),)),
    ),
    (
        "held-exclusively-by-another",
        REQUIRED,
        2,
        [rack("r1", 3, held=True, busy=True), rack("r2", 4, busy=True)],
        (),
        Choice((("r2", 2),)),
    ),
    (
        "preferred-one-when-one-holds",
        PREFERRED,
        3,
        [rack("r1", 3), rack("r2", 4)],
        (),
        Choice((("r1", 3),)),
    ),
    (
        "preferred-fewest",
        PREFERRED,
        6,
        [rack("r1", 2), rack("r2", 3), rack("r3", 4), rack("r4", 1)],
        (),
        Choice((("r3", 4), ("r1", 2))),
    ),
    (
        "preferred-larger-than-any",
        PREFERRED,
        6,
        [rack("r1", 4), rack("r2", 4)],
        (),
        Choice((("r1", 4), ("r2", 2))),
    ),
    (
        "never-fits",
        REQUIRED,
        6,
        [rack("r1", 4), rack("r2", 2)],
        (),
        Choice(never="needs 48 nvidia.com/gpu in one rack; the largest rack has 32"),
    ),
]


@pytest.mark.parametrize(
    ("placement", "pods", "racks", "tried", "expected"),
    [c[1:] for c in CHOICES],
    ids=[c[0] for c in CHOICES],
)
def test_choose(
    placement: Placement,
    pods: int,
    racks: list[Domain],
    tried: tuple[str, ...],
    expected: Choice,
) -> None:
    assert choose(placement, pods, Decimal(8), GPU, racks, tried) == expected


def test_no_node_has_the_label() -> None:
    assert choose(REQUIRED, 1, Decimal(8), GPU, []) == Choice(
        never=f"no node it may use has the label {RACK}"
    )


def test_never_fits_on_nodes_too_small() -> None:
    # Four 4-GPU nodes have 16 GPUs, but no 8-GPU pod fits one of them.
    small = Domain("r1", 0, 0, Decimal(16), False, False)
    assert choose(REQUIRED, 2, Decimal(8), GPU, [small]).never == (
        "needs 16 nvidia.com/gpu in one rack; the largest rack has 16, which holds 0 of its 2 pods"
    )


def node(name: str, rack: str, gpus: int = 8) -> dict[str, Any]:
    out = gpu_node(name, gpus)
    out["metadata"]["labels"][RACK] = rack
    return out


CONTAINERS = [{"name": "trainer", "resources": {"limits": {GPU: "8"}}}]
POD = {
    "metadata": {"name": "job-0"},
    "spec": {
        "containers": CONTAINERS,
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
    },
}
NODES = [node("a1", "r1"), node("a2", "r1"), node("b1", "r2"), node("b2", "r2", gpus=4)]


def other(node_name: str | None, domain: str | None = None, *, exclusive: bool = False) -> Any:
    labels = {"multigpu.dev/job-name": "other"}
    if domain:
        labels["multigpu.dev/topology-domain"] = domain
    if exclusive:
        labels["multigpu.dev/topology-exclusive"] = "true"
    return {
        "metadata": {"name": "other-0", "labels": labels, "ownerReferences": [{"uid": "o"}]},
        "spec": {"nodeName": node_name, "containers": CONTAINERS},
        "status": {"phase": "Running" if node_name else "Pending"},
    }


@pytest.mark.parametrize(
    ("pods", "avoided", "expected"),
    [
        pytest.param(
            [],
            (),
            [
                Domain("r1", 2, 2, Decimal(16), False, False),
                Domain("r2", 1, 1, Decimal(12), False, False),
            ],
            id="empty",
        ),
        pytest.param(
            [other("a1")],
            (),
            [
                Domain("r1", 2, 1, Decimal(16), False, False),
                Domain("r2", 1, 1, Decimal(12), False, False),
            ],
            id="used",
        ),
        pytest.param(
            [other(None, "r2")],
            (),
            [
                Domain("r1", 2, 2, Decimal(16), False, False),
                Domain("r2", 1, 0, Decimal(12), True, False),
            ],
            id="pinned-not-scheduled",
        ),
        pytest.param(
            [other("a2", "r1", exclusive=True)],
            ("b1",),
            [
                Domain("r1", 2, 1, Decimal(16), True, True),
                Domain("r2", 0, 0, Decimal(4), False, False),
            ],
            id="exclusive-and-avoided",
        ),
    ],
)
def test_domains_of(pods: list[Any], avoided: tuple[str, ...], expected: list[Domain]) -> None:
    held = occupancy(pods, own_uid="mine")
    assert domains_of(POD, NODES, RACK, GPU, avoided, held) == expected


def test_a_domain_where_the_scheduler_turned_a_pod_away_is_full() -> None:
    turned_away = other(None, "r1")
    turned_away["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    ]
    held = occupancy([turned_away], own_uid="mine")
    assert held.full == frozenset({"r1"})
    (r1, _) = domains_of(POD, NODES, RACK, GPU, (), held)
    assert (r1.ever, r1.now) == (2, 0)


def test_own_pods_take_room_but_do_not_make_busy() -> None:
    mine = other("a1", "r1")
    mine["metadata"]["ownerReferences"] = [{"uid": "mine"}]
    held = occupancy([mine], own_uid="mine")
    assert held.busy == frozenset()
    assert held.used["a1"][GPU] == 8
    assert occupancy([{**mine, "status": {"phase": "Succeeded"}}], "mine") == Occupancy()


# (id, placement, assigned, pods, racks, expected)
GROWTH: list[tuple[str, Placement, tuple[tuple[str, int], ...], int, list[Domain], Choice]] = [
    ("same", REQUIRED, (("r1", 2),), 2, [rack("r1", 0)], Choice((("r1", 2),))),
    ("shrinks", PREFERRED, (("r1", 2), ("r2", 2)), 3, [], Choice((("r1", 2), ("r2", 1)))),
    ("grows-inside", REQUIRED, (("r1", 2),), 4, [rack("r1", 2)], Choice((("r1", 4),))),
    (
        "required-waits",
        REQUIRED,
        (("r1", 2),),
        5,
        [rack("r1", 1), rack("r2", 4)],
        Choice(
            (("r1", 5),),
            waits="rack r1 has room for 1 more pods now; 2 wait there (Required)",
        ),
    ),
    (
        "preferred-leaves",
        PREFERRED,
        (("r1", 2),),
        5,
        [rack("r1", 1), rack("r2", 4), rack("r3", 2)],
        Choice(
            (("r1", 3), ("r3", 2)),
            note="rack r1 is full: 2 pods go to rack r3 (Preferred)",
        ),
    ),
    (
        "preferred-no-room-anywhere",
        PREFERRED,
        (("r1", 2),),
        4,
        [rack("r1", 0), rack("r2", 1)],
        Choice(
            (("r1", 3), ("r2", 1)),
            waits="1 pods wait in rack r1, which has no room now",
            note="rack r1 is full: 1 pods go to rack r2 (Preferred)",
        ),
    ),
]


@pytest.mark.parametrize(
    ("placement", "assigned", "pods", "racks", "expected"),
    [c[1:] for c in GROWTH],
    ids=[c[0] for c in GROWTH],
)
def test_grown(
    placement: Placement,
    assigned: tuple[tuple[str, int], ...],
    pods: int,
    racks: list[Domain],
    expected: Choice,
) -> None:
    assert grown(placement, assigned, pods, racks) == expected

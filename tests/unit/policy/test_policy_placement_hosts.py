"""Ranks follow topology (pure, policy/placement/hosts.py): inside its domains a job's
pods fill the fewest domains of each finer level of spec.placement.rankOrder, then the
fewest nodes, and the replica indexes follow that order; a domain without room for
them now leaves them to the scheduler."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from multigpu_operator.api.placement import HOSTNAME_LABEL, LABEL_DOMAIN, LABEL_HOST, Placement
from multigpu_operator.policy.placement.choice import Assignment
from multigpu_operator.policy.placement.hosts import hosts
from multigpu_operator.policy.placement.occupancy import Occupancy, occupancy
from support.policy import gpu_node

BLOCK, RACK = "example.com/block", "example.com/rack"
GPU = "nvidia.com/gpu"
BY_RACK = Placement(topology_key=RACK)
BY_BLOCK = Placement(topology_key=BLOCK, rank_order=[RACK])
BY_BLOCK_NODES_ONLY = Placement(topology_key=BLOCK)


def node(name: str, rack: str, *, host: bool = True) -> dict[str, Any]:
    """An 8-GPU node `name` of rack `rack` ("b0r1": block b0) labelled with its host."""
    out = gpu_node(name)
    labels = out["metadata"]["labels"]
    labels.update({RACK: rack, BLOCK: rack[:2]})
    if host:
        labels[HOSTNAME_LABEL] = f"h-{name}"
    return out


def pod(gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "job-0"},
        "spec": {
            "containers": [{"name": "trainer", "resources": {"limits": {GPU: str(gpus)}}}],
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def used(**gpus: int) -> Occupancy:
    """Other pods bound to nodes: node -> GPUs they hold."""
    return Occupancy(used={n: {GPU: Decimal(g)} for n, g in gpus.items()})


RACK_A = [node(f"a{i}", "b0r0") for i in (2, 0, 1)]  # listed out of order
BLOCK_0 = [*RACK_A, node("c0", "b0r1"), node("c1", "b0r1"), node("c2", "b0r1")]

# (id, placement, GPUs per pod, nodes, domains assigned, what is held, hosts by replica)
CASES: list[tuple[str, Placement, int, list[Any], Assignment, Occupancy, tuple[Any, ...]]] = [
    (
        "a-pod-per-node-by-name",
        BY_RACK,
        8,
        RACK_A,
        (("b0r0", 3),),
        Occupancy(),
        ("h-a0", "h-a1", "h-a2"),
    ),
    (
        "neighbouring-ranks-share-a-node",
        BY_RACK,
        4,
        RACK_A,
        (("b0r0", 4),),
        Occupancy(),
        ("h-a0", "h-a0", "h-a1", "h-a1"),
    ),
    (
        "fewest-nodes-on-a-fragmented-rack",
        BY_RACK,
        4,
        RACK_A,
        (("b0r0", 4),),
        used(a0=4),
        ("h-a1", "h-a1", "h-a2", "h-a2"),
    ),
    (
        "the-last-node-the-tightest-that-holds-the-rest",
        BY_RACK,
        4,
        RACK_A,
        (("b0r0", 3),),
        used(a0=4),
        ("h-a0", "h-a1", "h-a1"),
    ),
    (
        "no-room-now-left-to-the-scheduler",
        BY_RACK,
        8,
        RACK_A,
        (("b0r0", 3),),
        used(a1=8),
        (None, None, None),
    ),
    (
        "rank-order-fewest-racks",
        BY_BLOCK,
        8,
        BLOCK_0,
        (("b0", 3),),
        used(a0=8),
        ("h-c0", "h-c1", "h-c2"),
    ),
    (
        "rank-order-racks-by-name-each-contiguous",
        BY_BLOCK,
        8,
        BLOCK_0,
        (("b0", 5),),
        used(c1=8),
        ("h-a0", "h-a1", "h-a2", "h-c0", "h-c2"),
    ),
    (
        "nodes-only-without-rank-order",
        BY_BLOCK_NODES_ONLY,
        8,
        BLOCK_0,
        (("b0", 3),),
        used(a0=8),
        ("h-a1", "h-a2", "h-c0"),
    ),
    (
        "preferred-each-domain-in-turn",
        Placement(topology_key=RACK, policy="Preferred"),
        8,
        BLOCK_0,
        (("b0r1", 3), ("b0r0", 1)),
        used(a0=8, a1=8),
        ("h-c0", "h-c1", "h-c2", "h-a2"),
    ),
    (
        "a-node-without-a-hostname-is-not-used",
        BY_RACK,
        8,
        [*RACK_A[:2], node("a9", "b0r0", host=False)],
        (("b0r0", 2),),
        Occupancy(),
        ("h-a0", "h-a2"),
    ),
]


@pytest.mark.parametrize(
    ("placement", "gpus", "nodes", "assigned", "held", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_hosts_in_rank_order(
    placement: Placement,
    gpus: int,
    nodes: list[Any],
    assigned: Assignment,
    held: Occupancy,
    expected: tuple[Any, ...],
) -> None:
    assert hosts(pod(gpus), nodes, placement, assigned, held) == expected


def test_avoided_nodes_are_not_used() -> None:
    got = hosts(pod(8), RACK_A, BY_RACK, (("b0r0", 2),), Occupancy(), avoided=("a0",))
    assert got == ("h-a1", "h-a2")


@pytest.mark.parametrize(
    ("labels", "selector"),
    [
        pytest.param({LABEL_DOMAIN: "b0r0", LABEL_HOST: "h-a0"}, {}, id="given-a-node"),
        pytest.param({}, {HOSTNAME_LABEL: "h-a0"}, id="kueue-pinned"),
    ],
)
def test_another_jobs_pods_given_a_node_and_not_bound_take_its_room(
    labels: dict[str, str], selector: dict[str, str]
) -> None:
    waiting = {
        "metadata": {"ownerReferences": [{"uid": "other"}], "labels": labels},
        "spec": {
            "nodeSelector": selector,
            "containers": [{"name": "t", "resources": {"limits": {GPU: "8"}}}],
        },
        "status": {"phase": "Pending"},
    }
    held = occupancy([waiting], own_uid="mine")
    assert held.on_host == {"h-a0": {GPU: Decimal(8)}}
    assert held.pinned == {}
    assert hosts(pod(8), RACK_A, BY_RACK, (("b0r0", 2),), held) == ("h-a1", "h-a2")


def test_the_jobs_own_pods_do_not_move_the_order() -> None:
    # Replica 0 already created (asked for h-a0, not bound yet), replica 1 bound to a1:
    # the pass that creates replica 2 gives it the node it had in the first pass.
    mine = [
        {
            "metadata": {
                "ownerReferences": [{"uid": "mine"}],
                "labels": {LABEL_DOMAIN: "b0r0", LABEL_HOST: "h-a0"},
            },
            "spec": {"containers": [{"name": "t", "resources": {"limits": {GPU: "8"}}}]},
            "status": {"phase": "Pending"},
        },
        {
            "metadata": {"ownerReferences": [{"uid": "mine"}], "labels": {LABEL_DOMAIN: "b0r0"}},
            "spec": {
                "nodeName": "a1",
                "containers": [{"name": "t", "resources": {"limits": {GPU: "8"}}}],
            },
            "status": {"phase": "Running"},
        },
    ]
    held = occupancy(mine, own_uid="mine")
    assert hosts(pod(8), RACK_A, BY_RACK, (("b0r0", 3),), held) == ("h-a0", "h-a1", "h-a2")


def test_equal_nodes_are_ordered_for_each_job_by_its_uid() -> None:
    # A rack of six free nodes and jobs of two pods: each job's pair follows a hash of its
    # uid, so jobs decided at the same moment mostly ask for different nodes; each pair
    # is in name order, and the same uid always gets the same pair.
    rack = [node(f"a{i}", "b0r0") for i in range(6)]
    pairs = {
        uid: hosts(pod(8), rack, BY_RACK, (("b0r0", 2),), Occupancy(), salt=uid)
        for uid in ("job-a", "job-b", "job-c", "job-d")
    }
    for pair in pairs.values():
        named = [h for h in pair if h is not None]
        assert named == sorted(set(named))
        assert len(named) == 2
    assert len(set(pairs.values())) > 1
    assert hosts(pod(8), rack, BY_RACK, (("b0r0", 2),), Occupancy(), salt="job-a") == pairs["job-a"]
    assert hosts(pod(8), rack, BY_RACK, (("b0r0", 2),), Occupancy()) == ("h-a0", "h-a1")


def test_a_node_named_as_its_host_counts_the_jobs_own_pod_once() -> None:
    # Kubelets label a node with its own name: the job's pod bound there is left out once,
    # so the node still holds one pod of 8 GPUs, not two.
    rack = [node(f"a{i}", "b0r0") for i in range(3)]
    for n in rack:
        n["metadata"]["labels"][HOSTNAME_LABEL] = n["metadata"]["name"]
    bound = {
        "metadata": {"ownerReferences": [{"uid": "mine"}], "labels": {LABEL_DOMAIN: "b0r0"}},
        "spec": {
            "nodeName": "a0",
            "containers": [{"name": "t", "resources": {"limits": {GPU: "8"}}}],
        },
        "status": {"phase": "Running"},
    }
    held = occupancy([bound], own_uid="mine")
    assert hosts(pod(8), rack, BY_RACK, (("b0r0", 3),), held) == ("a0", "a1", "a2")
    assert hosts(pod(8), rack, BY_RACK, (("b0r0", 4),), held) == (None,) * 4

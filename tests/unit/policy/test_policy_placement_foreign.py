"""Other workloads' pods in the domain choice (pure, policy/placement/occupancy.py): what
they hold by node (cluster/foreign_pods.py) is taken from a domain's room as the
operator's own pods are, so a job goes at once to a domain that holds it now."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from multigpu_operator.api.placement import Placement
from multigpu_operator.policy.kube.quantity import parse_quantity
from multigpu_operator.policy.placement.choice import Choice, choose
from multigpu_operator.policy.placement.domains import domains_of
from multigpu_operator.policy.placement.occupancy import Occupancy, occupancy
from multigpu_operator.reconcile import decide
from support.policy import gpu_node, inputs, job

RACK = "example.com/rack"
GPU = "nvidia.com/gpu"
REQUIRED = Placement(topology_key=RACK)
PREFERRED = Placement(topology_key=RACK, policy="Preferred")


def node(name: str, rack: str) -> dict[str, Any]:
    out = gpu_node(name)
    out["metadata"]["labels"][RACK] = rack
    return out


# Two racks of four 8-GPU nodes, and one node in no rack.
NODES = (
    *(node(f"a{i}", "r1") for i in range(4)),
    *(node(f"b{i}", "r2") for i in range(4)),
    gpu_node("loose"),
)
POD: dict[str, Any] = {
    "metadata": {"name": "job-0"},
    "spec": {
        "containers": [{"name": "trainer", "resources": {"limits": {GPU: "8", "cpu": "4"}}}],
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
    },
}


def held(**by_node: dict[str, str]) -> dict[str, dict[str, Decimal]]:
    """What other workloads' pods hold: node -> resource -> amount."""
    return {n: {r: parse_quantity(q) for r, q in res.items()} for n, res in by_node.items()}


# (id, placement, pods of the job, other workloads' holdings, expected choice)
CASES: list[tuple[str, Placement, int, dict[str, dict[str, Decimal]], Choice]] = [
    ("none", REQUIRED, 4, {}, Choice((("r1", 4),))),
    (
        "one-gpu-makes-r1-one-node-short",
        REQUIRED,
        4,
        held(a2={GPU: "1"}),
        Choice((("r2", 4),)),
    ),
    ("preferred-goes-whole-elsewhere", PREFERRED, 4, held(a0={GPU: "2"}), Choice((("r2", 4),))),
    (
        "cpu-that-leaves-room-changes-nothing",
        REQUIRED,
        4,
        held(a0={"cpu": "8", "memory": "64Gi"}),
        Choice((("r1", 4),)),
    ),
    ("cpu-that-fills-a-node", REQUIRED, 4, held(a1={"cpu": "96"}), Choice((("r2", 4),))),
    ("a-node-in-no-rack", REQUIRED, 4, held(loose={GPU: "8"}), Choice((("r1", 4),))),
    (
        "small-job-takes-the-tightest-fit",
        REQUIRED,
        3,
        held(b3={GPU: "4"}),
        Choice((("r2", 3),)),
    ),
    (
        "both-racks-short-waits-in-the-roomiest",
        REQUIRED,
        4,
        held(a0={GPU: "8"}, a1={GPU: "8"}, b0={GPU: "1"}),
        Choice(
            (("r2", 4),),
            waits="no rack has room for 4 pods now; waiting in rack r2 (room for 3)",
        ),
    ),
]


@pytest.mark.parametrize(
    ("placement", "pods", "foreign", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_choice_counts_other_workloads_pods(
    placement: Placement, pods: int, foreign: dict[str, dict[str, Decimal]], expected: Choice
) -> None:
    domains = domains_of(POD, NODES, RACK, GPU, (), occupancy([], "mine", foreign))
    assert choose(placement, pods, Decimal(8), GPU, domains) == expected


def test_other_workloads_pods_add_to_the_operators_own() -> None:
    mine = {
        "metadata": {"name": "other-0", "ownerReferences": [{"uid": "o"}]},
        "spec": {"nodeName": "a0", "containers": POD["spec"]["containers"]},
        "status": {"phase": "Running"},
    }
    both = occupancy([mine], "me", held(a0={GPU: "0", "cpu": "2"}, b1={GPU: "3"}))
    assert both.used == {"a0": {GPU: Decimal(8), "cpu": Decimal(6)}, "b1": {GPU: Decimal(3)}}
    assert both.busy == frozenset()  # other workloads' pods make no domain busy
    assert occupancy([], "me", {}) == Occupancy()


def test_a_whole_pass_pins_a_new_job_to_the_rack_that_holds_it_now() -> None:
    placed = job(replicas=4, gpusPerReplica=8, placement={"topologyKey": RACK})
    free = decide(inputs(placed, nodes=NODES, occupancy=occupancy([], "me")))
    short = decide(inputs(placed, nodes=NODES, occupancy=occupancy([], "me", held(a3={GPU: "1"}))))
    assert {p["metadata"]["labels"]["multigpu.dev/topology-domain"] for p in free.create_pods} == {
        "r1"
    }
    assert {p["metadata"]["labels"]["multigpu.dev/topology-domain"] for p in short.create_pods} == {
        "r2"
    }
    assert short.status.placement is not None
    assert short.status.placement.summary == "rack r2 (4 pods)"

"""spec.placement through whole passes (reconcile.decide): the pods pinned to the chosen
domain in rank order, the choice recorded and read back, NoDomainFits said at once, and
another domain chosen after the gang timeout."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from multigpu_operator.api.placement import LABEL_HOST
from multigpu_operator.api.status import ConditionType
from multigpu_operator.policy.kube.conditions import Event
from multigpu_operator.policy.placement.occupancy import Occupancy
from multigpu_operator.reconcile import decide
from support.policy import at, gpu_node, inputs, job, pod, stamp

RACK = "example.com/rack"


def node(name: str, rack: str) -> dict[str, Any]:
    out = gpu_node(name)
    out["metadata"]["labels"][RACK] = rack
    return out


# r1: 2 nodes, r2: 4 nodes, r3: 1 node (8 GPUs each)
NODES = (
    *(node(f"a{i}", "r1") for i in range(2)),
    *(node(f"b{i}", "r2") for i in range(4)),
    node("c0", "r3"),
)


def placed_job(replicas: int = 2, **placement: Any) -> Any:
    return job(
        replicas=replicas,
        gpusPerReplica=8,
        placement={"topologyKey": RACK, **placement},
        gang={"timeoutSeconds": 60},
    )


def elastic_job(replicas: int) -> Any:
    return job(
        "Elastic",
        replicas=replicas,
        gpusPerReplica=8,
        elastic={"minReplicas": 1, "maxReplicas": 4},
        placement={"topologyKey": RACK},
    )


def pinned_to(created: dict[str, Any]) -> str:
    terms = created["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    (expression,) = [e for t in terms for e in t["matchExpressions"] if e["key"] == RACK]
    assert created["metadata"]["labels"]["multigpu.dev/topology-domain"] == expression["values"][0]
    return str(expression["values"][0])


def test_new_job_pinned_to_the_tightest_rack_and_recorded_first() -> None:
    decision = decide(inputs(placed_job(2), nodes=NODES))
    assert [pinned_to(p) for p in decision.create_pods] == ["r1", "r1"]
    placement = decision.status.placement
    assert placement is not None
    assert placement.summary == "rack r1 (2 pods)"
    assert not decision.status_waits  # the choice is written before its pods exist
    assert Event("Normal", "Placed", "pods placed in rack r1 (2 pods)") in decision.events


def test_recorded_choice_is_read_back() -> None:
    previous = {"placement": {"topologyKey": RACK, "domains": [{"name": "r2", "pods": 2}]}}
    decision = decide(inputs(placed_job(2), previous=previous, nodes=NODES))
    assert [pinned_to(p) for p in decision.create_pods] == ["r2", "r2"]
    assert not [e for e in decision.events if e.reason == "Placed"]


def test_preferred_spreads_over_the_fewest_in_rank_order() -> None:
    decision = decide(inputs(placed_job(5, policy="Preferred"), nodes=NODES))
    assert [pinned_to(p) for p in decision.create_pods] == ["r2"] * 4 + ["r3"]


def test_no_domain_fits_at_once() -> None:
    decision = decide(inputs(placed_job(5), nodes=NODES))
    assert decision.create_pods == ()
    assert decision.status.reason == "NoDomainFits"
    cond = decision.status.condition(ConditionType.SCHEDULED)
    assert cond is not None
    assert cond.message is not None
    assert cond.message.startswith(
        "needs 40 nvidia.com/gpu in one rack; the largest rack has 32; the job fails after"
    )
    assert [e.reason for e in decision.events if e.type == "Warning"] == ["NoDomainFits"]


def test_no_domain_fits_fails_after_the_gang_timeout() -> None:
    previous = {"unscheduledSince": stamp(0), "attempt": 1}
    decision = decide(inputs(placed_job(5), previous=previous, nodes=NODES, now=at(61)))
    assert decision.status.phase == "Failed"
    assert decision.status.reason == "NoDomainFits"


def unschedulable(index: int) -> dict[str, Any]:
    out = pod(index, scheduled="Unschedulable")
    out["metadata"]["labels"]["multigpu.dev/topology-domain"] = "r1"
    out["spec"] = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
    }
    return out


TIMED_OUT = {
    "placement": {"topologyKey": RACK, "domains": [{"name": "r1", "pods": 2}]},
    "unscheduledSince": stamp(0),
    "attempt": 1,
    "createdAttempt": 1,
}


def test_another_rack_when_the_scheduler_turns_the_gang_away() -> None:
    pods = [unschedulable(0), unschedulable(1)]
    decision = decide(inputs(placed_job(2), pods, previous=TIMED_OUT, nodes=NODES, now=at(61)))
    assert decision.delete_pods == ("job-0", "job-1")
    placement = decision.status.placement
    assert placement is not None
    assert placement.tried == ["r1"]
    assert placement.domains is None
    cond = decision.status.condition(ConditionType.SCHEDULED)
    assert cond is not None
    assert cond.reason == "PlacementRetried"
    # The next pass, its pods gone: chosen again without r1.
    later = decide(
        inputs(placed_job(2), previous=decision.status.as_api(), nodes=NODES, now=at(62))
    )
    assert [pinned_to(p) for p in later.create_pods] == ["r2", "r2"]
    assert later.status.attempt == 2
    assert not later.status.restarts


def test_a_gang_partly_placed_moves_only_at_the_gang_timeout() -> None:
    placed = unschedulable(0)
    placed["spec"]["nodeName"] = "a0"
    pods = [placed, unschedulable(1)]
    before = decide(inputs(placed_job(2), pods, previous=TIMED_OUT, nodes=NODES, now=at(30)))
    assert before.delete_pods == ()
    after = decide(inputs(placed_job(2), pods, previous=TIMED_OUT, nodes=NODES, now=at(61)))
    assert after.delete_pods == ("job-0", "job-1")


def test_pods_the_scheduler_has_not_turned_away_stay() -> None:
    pods = [pod(0), pod(1)]
    decision = decide(inputs(placed_job(2), pods, previous=TIMED_OUT, nodes=NODES, now=at(1)))
    assert decision.delete_pods == ()


def test_every_rack_tried_then_on_timeout_applies() -> None:
    placement = {"topologyKey": RACK, "domains": [{"name": "r1", "pods": 2}], "tried": ["r2", "r3"]}
    previous = {**TIMED_OUT, "placement": placement}
    pods = [unschedulable(0), unschedulable(1)]
    decision = decide(inputs(placed_job(2), pods, previous=previous, nodes=NODES, now=at(61)))
    cond = decision.status.condition(ConditionType.SCHEDULED)
    assert cond is not None
    assert cond.reason == "GangTimeout"  # Requeue, the default


def test_avoided_nodes_stay_avoided() -> None:
    # r1's nodes are avoided: the 2 pods go to the next tightest rack.
    previous = {"avoidedNodes": ["a0"]}
    decision = decide(inputs(placed_job(2), previous=previous, nodes=NODES))
    assert [pinned_to(p) for p in decision.create_pods] == ["r2", "r2"]
    affinity = decision.create_pods[0]["spec"]["affinity"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [e["operator"] for e in term["matchExpressions"]] == ["NotIn", "In"]


def test_exclusive_pods_keep_other_jobs_out() -> None:
    decision = decide(inputs(placed_job(2, exclusive=True), nodes=NODES))
    first = decision.create_pods[0]
    assert first["metadata"]["labels"]["multigpu.dev/topology-exclusive"] == "true"
    (term,) = first["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == RACK


def test_queued_in_kueue_places_nothing() -> None:
    decision = decide(inputs(placed_job(2), nodes=NODES, queued=True))
    assert all("affinity" not in p["spec"] for p in decision.create_pods)


def test_no_other_rack_has_room_now_then_on_timeout_applies() -> None:
    # r2's nodes are full of another job's pods; r3 holds one pod: r1 stays.
    full = Occupancy(used={f"b{i}": {"nvidia.com/gpu": Decimal(8)} for i in range(4)})
    pods = [unschedulable(0), unschedulable(1)]
    decision = decide(
        inputs(placed_job(2), pods, previous=TIMED_OUT, nodes=NODES, now=at(61), occupancy=full)
    )
    cond = decision.status.condition(ConditionType.SCHEDULED)
    assert cond is not None
    assert cond.reason == "GangTimeout"


def test_an_elastic_job_grows_inside_its_rack_and_says_when_it_must_wait() -> None:
    elastic = elastic_job(3)
    previous = {"placement": {"topologyKey": RACK, "domains": [{"name": "r1", "pods": 1}]}}
    # r1 has 2 nodes, its running pod holds one: one more pod fits there, the third
    # waits there (Required).
    own = Occupancy(used={"a0": {"nvidia.com/gpu": Decimal(8)}})
    running = [pod(0, "Running", node="a0")]
    decision = decide(inputs(elastic, running, previous=previous, nodes=NODES, occupancy=own))
    assert [pinned_to(p) for p in decision.create_pods] == ["r1", "r1"]
    (placed,) = [e for e in decision.events if e.reason == "Placed"]
    assert placed.message == (
        "pods placed in rack r1 (3 pods): rack r1 has room for 1 more pods now; "
        "1 wait there (Required)"
    )


def with_hosts(nodes: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """`nodes` labelled kubernetes.io/hostname as kubelets label them."""
    out = []
    for n in nodes:
        labelled = {**n, "metadata": {**n["metadata"], "labels": dict(n["metadata"]["labels"])}}
        labelled["metadata"]["labels"]["kubernetes.io/hostname"] = n["metadata"]["name"]
        out.append(labelled)
    return tuple(out)


def test_each_pod_pinned_to_its_node_in_rank_order() -> None:
    # r2's b1 is taken: the 3 pods go to r2's other nodes, replica i to the i-th by name.
    taken = Occupancy(used={"b1": {"nvidia.com/gpu": Decimal(8)}})
    decision = decide(inputs(placed_job(3), nodes=with_hosts(NODES), occupancy=taken))
    assert [pinned_to(p) for p in decision.create_pods] == ["r2"] * 3
    assert [asked_for(p) for p in decision.create_pods] == ["b0", "b2", "b3"]
    assert [p["metadata"]["labels"][LABEL_HOST] for p in decision.create_pods] == ["b0", "b2", "b3"]


def asked_for(created: dict[str, Any]) -> str | None:
    """The node a pod prefers (a preferred node affinity on kubernetes.io/hostname)."""
    node = created["spec"]["affinity"]["nodeAffinity"]
    for term in node.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        for e in term["preference"]["matchExpressions"]:
            if e["key"] == "kubernetes.io/hostname":
                assert term["weight"] == 100
                return str(e["values"][0])
    return None


def test_an_elastic_job_is_pinned_to_its_domain_only() -> None:
    # torchrun's rendezvous gives an Elastic job's ranks: no node order to keep.
    elastic = elastic_job(2)
    decision = decide(inputs(elastic, nodes=with_hosts(NODES)))
    assert [pinned_to(p) for p in decision.create_pods] == ["r1", "r1"]
    assert [asked_for(p) for p in decision.create_pods] == [None, None]


def test_a_new_attempts_pods_given_nodes_are_created_together() -> None:
    # Attempt 2 of a job in r2: replica 1 of attempt 1 is still being deleted, so
    # replica 0's name is free and replica 1's is not: nothing is created until both are.
    previous = {
        "attempt": 2,
        "createdAttempt": 1,
        "placement": {"topologyKey": RACK, "domains": [{"name": "r2", "pods": 2}]},
    }
    leaving = [pod(1, "Running", attempt=1, node="b1", deleting=True)]
    nodes = with_hosts(NODES)
    waiting = decide(inputs(placed_job(2), leaving, previous=previous, nodes=nodes))
    assert waiting.create_pods == ()
    created = decide(inputs(placed_job(2), [], previous=previous, nodes=nodes))
    asked = [h for h in (asked_for(p) for p in created.create_pods) if h is not None]
    assert len(set(asked)) == 2
    assert asked == sorted(asked)
    assert set(asked) <= {"b0", "b1", "b2", "b3"}  # r2's

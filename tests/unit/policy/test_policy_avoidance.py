"""A job's later pods kept off the nodes where infrastructure faults ended its pods,
unless no other node could ever fit them (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.failure_policy import Fault
from multigpu_operator.api.limits import MAX_AVOIDED_NODES
from multigpu_operator.plan import plan_job
from multigpu_operator.policy.failures.avoidance import avoided_after, avoiding, kept_off
from multigpu_operator.policy.failures.failed_pods import Failure
from multigpu_operator.policy.failures.faults import Diagnosis
from support.policy import gpu_node, job

NOT_IN = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-node-0"]}


def ended_by(kind: Fault, node: str) -> Failure:
    return Failure("job-0", "0", None, "r", diagnosis=Diagnosis(kind, node))


@pytest.mark.parametrize(
    ("before", "failures", "after"),
    [
        pytest.param([], [ended_by(Fault.NODE_LOST, "n1")], ["n1"], id="node-lost"),
        pytest.param(["n1"], [ended_by(Fault.GPU_UNHEALTHY, "n2")], ["n1", "n2"], id="gpu"),
        pytest.param([], [ended_by(Fault.NODE_SHUTDOWN, "n1")], ["n1"], id="node-shutdown"),
        pytest.param([], [ended_by(Fault.PREEMPTED, "n1")], [], id="preempted-node-is-fine"),
        pytest.param([], [ended_by(Fault.EVICTED, "n1")], [], id="evicted-node-is-fine"),
        pytest.param([], [Failure("job-0", "0", 1, "Error")], [], id="the-pods-own-failure"),
        pytest.param(["n1", "n2"], [ended_by(Fault.NODE_LOST, "n1")], ["n2", "n1"], id="latest"),
        pytest.param([], [ended_by(Fault.NODE_LOST, "")], [], id="node-unknown"),
    ],
)
def test_which_nodes_are_avoided(
    before: list[str], failures: list[Failure], after: list[str]
) -> None:
    assert avoided_after(before, failures) == after


def test_the_list_is_bounded_keeping_the_latest() -> None:
    many = [f"n{i}" for i in range(MAX_AVOIDED_NODES)]
    assert avoided_after(many, [ended_by(Fault.NODE_LOST, "new")]) == [*many[1:], "new"]


def affinity(pod: dict[str, Any]) -> Any:
    return pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]


def test_pods_get_a_required_anti_affinity_on_the_failed_nodes() -> None:
    desired = plan_job(job())
    avoided, note = avoiding(desired, ["gpu-node-0"], [gpu_node("gpu-node-0"), gpu_node("g1")])
    assert (avoided, note) == (("gpu-node-0",), "avoiding nodes gpu-node-0 (faults before)")
    pod = kept_off(desired.pods[0], avoided)
    assert affinity(pod) == {"nodeSelectorTerms": [{"matchExpressions": [NOT_IN]}]}
    assert "affinity" not in desired.pods[0]["spec"]  # the plan itself is left as it was


def test_the_templates_own_affinity_is_kept_in_every_term() -> None:
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    rack = {"key": "rack", "operator": "In", "values": ["r1"]}
    preferred = [{"weight": 1, "preference": {"matchExpressions": [zone]}}]
    template = {
        "spec": {
            "containers": [{"name": "trainer", "image": "train:1"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [zone]},
                            {"matchExpressions": [rack], "matchFields": []},
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": preferred,
                }
            },
        }
    }
    desired = plan_job(job(template=template))
    avoided, _ = avoiding(desired, ["gpu-node-0"], ())  # nodes unknown: avoided all the same
    pod = kept_off(desired.pods[0], avoided)
    assert affinity(pod)["nodeSelectorTerms"] == [
        {"matchExpressions": [zone, NOT_IN]},
        {"matchExpressions": [rack, NOT_IN], "matchFields": []},
    ]
    node_affinity = pod["spec"]["affinity"]["nodeAffinity"]
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == preferred


def test_nothing_is_avoided_when_no_other_node_could_ever_fit() -> None:
    eight = job(gpusPerReplica=8)
    desired = plan_job(eight)
    nodes = [gpu_node("gpu-node-0", gpus=8), gpu_node("small", gpus=4)]
    avoided, note = avoiding(desired, ["gpu-node-0"], nodes)
    assert avoided == ()
    assert note.startswith("not avoiding nodes gpu-node-0 (faults before): no node can ever fit")
    avoided, note = avoiding(desired, ["gpu-node-0"], nodes[:1])
    assert avoided == ()
    assert note == "not avoiding nodes gpu-node-0 (faults before): there is no other node"


def test_nothing_is_avoided_when_the_other_nodes_could_never_hold_the_whole_gang() -> None:
    desired = plan_job(job(gpusPerReplica=8))  # two pods of 8 GPUs: a node each
    two = [gpu_node("gpu-node-0"), gpu_node("gpu-node-1")]
    avoided, note = avoiding(desired, ["gpu-node-0"], two)
    assert avoided == ()
    assert note.endswith("the other nodes could never hold all 2 pods at once (only 1)")
    three = [*two, gpu_node("gpu-node-2")]
    avoided, note = avoiding(desired, ["gpu-node-0"], three)
    assert (avoided, note) == (("gpu-node-0",), "avoiding nodes gpu-node-0 (faults before)")
    half = plan_job(job(gpusPerReplica=4))  # two pods of 4 GPUs fit on one node
    assert avoiding(half, ["gpu-node-0"], two)[1] == "avoiding nodes gpu-node-0 (faults before)"


def test_nothing_to_avoid() -> None:
    desired = plan_job(job())
    assert avoiding(desired, [], [gpu_node("gpu-node-0")]) == ((), "")

"""Infrastructure faults told from a pod and the nodes the pass sees (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.failure_policy import Fault
from multigpu_operator.policy.failures.failed_pods import failures
from multigpu_operator.policy.failures.faults import Diagnosis, diagnose
from support.policy import gpu_node, pod


def on_node(status: dict[str, Any] | None = None, phase: str = "Failed") -> dict[str, Any]:
    p = pod(0, phase, node="gpu-node-0")
    p["status"].update(status or {})
    return p


def disruption(reason: str, message: str = "") -> dict[str, Any]:
    cond = {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message}
    return {"conditions": [cond]}


def device_health(health: str, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    devices = [{"resourceID": "GPU-0"}, {"resourceID": "GPU-7f3a", "health": health}]
    container = {
        "name": "trainer",
        "state": {"running": {}},
        "allocatedResourcesStatus": [{"name": resource, "resources": devices}],
    }
    return {"containerStatuses": [container]}


def tainted(key: str, value: str = "", effect: str = "NoExecute") -> dict[str, Any]:
    node = gpu_node("gpu-node-0")
    node["spec"]["taints"] = [
        *node["spec"]["taints"],
        {"key": key, "value": value, "effect": effect},
    ]
    return node


NODES = [gpu_node("gpu-node-0"), gpu_node("gpu-node-1")]
UNREACHABLE = [tainted("node.kubernetes.io/unreachable"), gpu_node("gpu-node-1")]


@pytest.mark.parametrize(
    ("p", "nodes", "expected"),
    [
        pytest.param(on_node(), NODES, None, id="a-failure-of-the-pod-itself"),
        pytest.param(
            on_node(disruption("DeletionByTaintManager")),
            UNREACHABLE,
            Diagnosis(Fault.NODE_LOST, "gpu-node-0", why="DeletionByTaintManager"),
            id="evicted-from-an-unreachable-node",
        ),
        pytest.param(
            on_node(disruption("DeletionByPodGC")),
            NODES[1:],
            Diagnosis(Fault.NODE_LOST, "gpu-node-0", why="DeletionByPodGC"),
            id="removed-with-its-node",
        ),
        pytest.param(
            on_node(),
            NODES[1:],
            Diagnosis(Fault.NODE_LOST, "gpu-node-0", why="the node was removed"),
            id="its-node-is-gone",
        ),
        pytest.param(
            on_node(),
            UNREACHABLE,
            Diagnosis(
                Fault.NODE_LOST,
                "gpu-node-0",
                why="the node has taint node.kubernetes.io/unreachable",
            ),
            id="its-node-is-unreachable",
        ),
        pytest.param(
            on_node({"reason": "NodeLost"}),
            (),
            Diagnosis(Fault.NODE_LOST, "gpu-node-0", why="NodeLost"),
            id="pod-reason-node-lost",
        ),
        pytest.param(
            on_node(disruption("EvictionByEvictionAPI")),
            NODES,
            Diagnosis(Fault.EVICTED, "gpu-node-0", why="EvictionByEvictionAPI"),
            id="drained",
        ),
        pytest.param(
            on_node({"reason": "Evicted"}),
            NODES,
            Diagnosis(Fault.EVICTED, "gpu-node-0", why="Evicted"),
            id="evicted-by-the-kubelet",
        ),
        pytest.param(
            on_node(disruption("PreemptionByScheduler")),
            NODES,
            Diagnosis(Fault.PREEMPTED, "gpu-node-0", why="PreemptionByScheduler"),
            id="preempted",
        ),
        pytest.param(
            on_node(
                {
                    **disruption("TerminationByKubelet"),
                    "reason": "Terminated",
                    "message": "Pod was terminated in response to imminent node shutdown.",
                }
            ),
            NODES,
            Diagnosis(Fault.NODE_SHUTDOWN, "gpu-node-0", why="TerminationByKubelet"),
            id="node-shutdown",
        ),
        pytest.param(
            on_node({"reason": "Terminated"}),
            NODES,
            Diagnosis(Fault.NODE_SHUTDOWN, "gpu-node-0", why="Terminated"),
            id="node-shutdown-by-pod-reason",
        ),
        pytest.param(
            on_node(device_health("Unhealthy"), phase="Running"),
            NODES,
            Diagnosis(
                Fault.GPU_UNHEALTHY, "gpu-node-0", "GPU-7f3a", "nvidia.com/gpu reported Unhealthy"
            ),
            id="gpu-reported-unhealthy",
        ),
        pytest.param(
            on_node(device_health("Unhealthy", "nvidia.com/mig-1g.10gb")),
            NODES,
            Diagnosis(
                Fault.GPU_UNHEALTHY,
                "gpu-node-0",
                "GPU-7f3a",
                "nvidia.com/mig-1g.10gb reported Unhealthy",
            ),
            id="mig-slice-reported-unhealthy",
        ),
        pytest.param(
            on_node(device_health("Unknown")), NODES, None, id="gpu-health-unknown-is-no-fault"
        ),
        pytest.param(
            on_node(device_health("Unhealthy", "example.com/nic")),
            NODES,
            None,
            id="another-device-is-not-a-gpu",
        ),
        pytest.param(
            on_node(),
            [tainted("nvidia.com/gpu-health", "unhealthy", "NoSchedule")],
            Diagnosis(
                Fault.GPU_UNHEALTHY,
                "gpu-node-0",
                why="the node has taint nvidia.com/gpu-health=unhealthy",
            ),
            id="gpu-health-taint-on-its-node",
        ),
        pytest.param(
            on_node(),
            [tainted("nvidia.com/gpu", "present", "NoSchedule")],
            None,
            id="a-dedicated-gpu-node-taint-is-no-fault",
        ),
        pytest.param(
            on_node(
                {
                    "reason": "UnexpectedAdmissionError",
                    "message": "Allocate failed due to no healthy devices present; "
                    "cannot allocate unhealthy devices nvidia.com/gpu",
                }
            ),
            NODES,
            Diagnosis(
                Fault.GPU_UNHEALTHY,
                "gpu-node-0",
                why="Allocate failed due to no healthy devices present; "
                "cannot allocate unhealthy devices nvidia.com/gpu",
            ),
            id="the-kubelet-could-not-give-its-gpus",
        ),
    ],
)
def test_what_ended_a_pod(
    p: dict[str, Any], nodes: list[dict[str, Any]], expected: Diagnosis | None
) -> None:
    assert diagnose(p, nodes) == expected


def test_a_running_pod_on_an_unhealthy_gpu_is_a_failure_naming_the_device() -> None:
    (found,) = failures([on_node(device_health("Unhealthy"), phase="Running")], NODES)
    assert found.fault is Fault.GPU_UNHEALTHY
    assert found.exit_code is None
    assert "on node gpu-node-0 (device GPU-7f3a)" in found.message()
    status = found.as_status(2, "spec.runPolicy.infrastructureRetries").model_dump()
    assert status["device"] == "GPU-7f3a"
    assert status["node"] == "gpu-node-0"


def test_what_the_rules_match_on() -> None:
    p = on_node({**disruption("DeletionByTaintManager"), "reason": "Evicted"})
    p["status"]["containerStatuses"] = [
        {"name": "trainer", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}},
        {"name": "log", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
    ]
    (found,) = failures([p], NODES)
    assert set(found.reasons) >= {"OOMKilled", "Completed", "Evicted"}
    assert found.conditions == ("DisruptionTarget",)

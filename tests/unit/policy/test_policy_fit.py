"""Whether any node could ever run a job's pod, and if not why (pure)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.plan import plan_job
from multigpu_operator.policy.kube.fit import NoFit, copies_that_fit, never_fits, pod_requests
from support.policy import job

H100 = "NVIDIA-H100-80GB-HBM3"
GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}


def node(
    name: str,
    gpus: int = 8,
    *,
    memory: str = "1Ti",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A node as the node informer keeps it; GPU nodes carry the GPU taint."""
    allocatable = {"cpu": "96", "memory": memory, "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    gpu_labels = {"nvidia.com/gpu.product": H100} if gpus else {}
    return {
        "metadata": {"name": name, "labels": {**gpu_labels, **(labels or {})}},
        "spec": {"taints": [GPU_TAINT] * bool(gpus) + (taints or [])},
        "status": {"allocatable": allocatable},
    }


CLUSTER = [node("gpu-0"), node("gpu-1"), node("cpu-0", gpus=0, memory="128Gi")]


def first_pod(j: Job) -> dict[str, Any]:
    return plan_job(j).pods[0]


def with_resources(**resources: str) -> dict[str, Any]:
    container = {"name": "trainer", "image": "i", "resources": {"requests": resources}}
    return {"spec": {"containers": [container]}}


@pytest.mark.parametrize(
    ("j", "nodes", "why"),
    [
        pytest.param(job(gpusPerReplica=8), CLUSTER, None, id="fits-on-a-whole-node"),
        pytest.param(job(), CLUSTER, None, id="cpu-pod-on-the-cpu-node"),
        pytest.param(job(gpusPerReplica=16), [], None, id="nodes-unknown-is-not-never"),
        pytest.param(
            job(gpusPerReplica=16),
            CLUSTER,
            "it asks for 16 nvidia.com/gpu, the largest node has 8",
            id="more-gpus-than-any-node",
        ),
        pytest.param(
            job(gpusPerReplica=1, gpuProduct="NVIDIA-H200"),
            CLUSTER,
            "it selects nvidia.com/gpu.product=NVIDIA-H200 (spec.gpuProduct) and no node has "
            f"that label; nodes have nvidia.com/gpu.product={H100}",
            id="no-such-gpu-product",
        ),
        pytest.param(
            job(gpusPerReplica=16),
            [
                *CLUSTER,
                node("big", 16, taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}]),
            ],
            "it asks for 16 nvidia.com/gpu, the largest node it may use has 8",
            id="the-only-big-node-is-tainted",
        ),
        pytest.param(
            job(gpusPerReplica=16),
            [*CLUSTER, node("big", 16, taints=[{"key": "team", "effect": "PreferNoSchedule"}])],
            None,
            id="a-preference-is-no-taint",
        ),
        pytest.param(
            job(gpusPerReplica=16),
            [
                *CLUSTER,
                node(
                    "big",
                    16,
                    taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}],
                ),
            ],
            None,
            id="a-not-ready-node-may-be-ready-later",
        ),
        pytest.param(
            job(
                gpusPerReplica=16,
                template={
                    "spec": {
                        "containers": [{"name": "trainer", "image": "i"}],
                        "tolerations": [{"key": "team", "operator": "Equal", "value": "a"}],
                    }
                },
            ),
            [
                *CLUSTER,
                node("big", 16, taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}]),
            ],
            None,
            id="tolerated",
        ),
        pytest.param(
            job(gpusPerReplica=1),
            [node("gpu-0", taints=[{"key": "team", "value": "a", "effect": "NoExecute"}])] * 2,
            "every node it selects has a taint it does not tolerate: team=a:NoExecute (2 nodes)",
            id="every-node-tainted",
        ),
        pytest.param(
            job(template=with_resources(memory="2Ti")),
            CLUSTER,
            "it asks for 2Ti memory, the largest node it may use has 128Gi",
            id="memory-on-the-nodes-it-may-use",
        ),
        pytest.param(
            job(gpusPerReplica=1, gpuResource="nvidia.com/mig-1g.10gb"),
            CLUSTER,
            "it asks for 1 nvidia.com/mig-1g.10gb, the largest node has no nvidia.com/mig-1g.10gb",
            id="a-resource-no-node-has",
        ),
        pytest.param(
            job(gpusPerReplica=16, template=with_resources(memory="1Ti")),
            [node("gpus", 16, memory="100Gi"), node("memory", 8, memory="2Ti")],
            "no node has all it asks for at once (16 nvidia.com/gpu, 1Ti memory)",
            id="enough-of-each-but-not-on-one-node",
        ),
        pytest.param(
            job(
                template={
                    "spec": {
                        "containers": [{"name": "trainer", "image": "i"}],
                        "nodeSelector": {"pool": "a", "zone": "b"},
                    }
                }
            ),
            [node("a", 0, labels={"pool": "a"}), node("b", 0, labels={"zone": "b"})],
            "no node has all the labels of its nodeSelector (pool=a, zone=b)",
            id="each-label-somewhere-but-not-together",
        ),
    ],
)
def test_never_fits(j: Job, nodes: list[dict[str, Any]], why: str | None) -> None:
    expected = NoFit("job-0", why) if why else None
    assert never_fits(first_pod(j), nodes) == expected


def test_the_message_names_the_pod() -> None:
    assert NoFit("big-0", "it asks for 16 nvidia.com/gpu, the largest node has 8").message() == (
        "no node can ever fit pod big-0: it asks for 16 nvidia.com/gpu, the largest node has 8"
    )


def container(name: str, restart: str | None = None, **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"limits": dict(requests)}}
    if restart:
        c["restartPolicy"] = restart
    return c


@pytest.mark.parametrize(
    ("spec", "requests"),
    [
        pytest.param({}, {}, id="nothing"),
        pytest.param(
            {"containers": [container("a", cpu="1", memory="1Gi"), container("b", cpu="500m")]},
            {"cpu": Decimal("1.5"), "memory": Decimal(2**30)},
            id="containers-add-up",
        ),
        pytest.param(
            {
                "containers": [
                    {
                        "name": "a",
                        "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}},
                    }
                ]
            },
            {"cpu": Decimal(1)},
            id="a-request-overrides-the-limit",
        ),
        pytest.param(
            {
                "initContainers": [
                    container("sidecar", "Always", cpu="1"),
                    container("setup", cpu="4"),
                ],
                "containers": [container("a", cpu="2")],
            },
            {"cpu": Decimal(5)},
            id="an-init-container-with-the-sidecars-before-it",
        ),
        pytest.param(
            {
                "initContainers": [
                    container("setup", cpu="1"),
                    container("sidecar", "Always", cpu="1"),
                ],
                "containers": [container("a", cpu="2")],
                "overhead": {"cpu": "250m"},
            },
            {"cpu": Decimal("3.25")},
            id="sidecars-run-beside-the-containers-plus-overhead",
        ),
        pytest.param(
            {"containers": [container("a", cpu="lots")]},
            {},
            id="what-does-not-parse-is-left-to-the-api-server",
        ),
    ],
)
def test_pod_requests(spec: dict[str, Any], requests: dict[str, Decimal]) -> None:
    assert pod_requests(spec) == requests


@pytest.mark.parametrize(
    ("j", "nodes", "copies"),
    [
        pytest.param(job(gpusPerReplica=8), CLUSTER, 2, id="a-node-each"),
        pytest.param(job(gpusPerReplica=2), CLUSTER, 8, id="four-a-node"),
        pytest.param(job(gpusPerReplica=3), CLUSTER, 4, id="what-is-left-over-holds-none"),
        pytest.param(job(gpusPerReplica=8), [node("gpu-0", gpus=4)], 0, id="too-small"),
        pytest.param(
            job(gpusPerReplica=8, gpuProduct="NVIDIA-A100"), CLUSTER, 0, id="wrong-product"
        ),
        pytest.param(job(gpusPerReplica=8), [], 0, id="no-nodes"),
    ],
)
def test_how_many_copies_of_a_pod_the_nodes_could_hold(
    j: Job, nodes: list[dict[str, Any]], copies: int
) -> None:
    assert copies_that_fit(first_pod(j), nodes) == copies

"""Kueue's Topology Aware Scheduling for a job with spec.placement (api/kueue_topology.py):
the Workload's topology request, the admission's topology assignment read back, the pods
pinned in rank order to Kueue's domains, and status.placement from it."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api import kueue
from multigpu_operator.api.kueue_topology import TopologyAssignment, topology_assignment
from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.plan import plan_job
from multigpu_operator.plan.workload import PodSetInfo, admitted_pods, build_workload
from multigpu_operator.policy.kube.kueue_admission import Admission, Queued, admission_of
from multigpu_operator.policy.placement.placed import admitted
from multigpu_operator.reconcile import decide
from support.policy import inputs

RACK = "example.com/rack"
HOST = "kubernetes.io/hostname"


def queued_job(replicas: int = 3, policy: str = "Required") -> Job:
    return Job.from_object(
        {
            "metadata": {
                "name": "train",
                "namespace": "ns",
                "uid": "uid-1",
                "labels": {kueue.QUEUE_NAME_LABEL: "q"},
            },
            "spec": {
                "mode": "DistributedDataParallel",
                "replicas": replicas,
                "gpusPerReplica": 8,
                "placement": {"topologyKey": RACK, "policy": policy},
                "template": {"spec": {"containers": [{"name": "trainer", "image": "t:1"}]}},
            },
        }
    )


@pytest.mark.parametrize(("policy", "key"), [("Required", "required"), ("Preferred", "preferred")])
def test_the_pod_set_asks_for_the_level(policy: str, key: str) -> None:
    job = queued_job(policy=policy)
    (pod_set,) = build_workload(job, plan_job(job), None)["spec"]["podSets"]
    assert pod_set["topologyRequest"] == {key: RACK, "podIndexLabel": "multigpu.dev/replica-index"}


UNIVERSAL = {
    "levels": [RACK, HOST],
    "slices": [
        {
            "domainCount": 2,
            "valuesPerLevel": [
                {"universal": "r1"},
                {"individual": {"prefix": "node-", "roots": ["a", "b"]}},
            ],
            "podCounts": {"individual": [2, 1]},
        }
    ],
}
TWO_SLICES = {
    "levels": [RACK],
    "slices": [
        {"domainCount": 1, "valuesPerLevel": [{"universal": "r2"}], "podCounts": {"universal": 1}},
        {
            "domainCount": 2,
            "valuesPerLevel": [{"individual": {"roots": ["r3", "r4"], "suffix": "-x"}}],
            "podCounts": {"universal": 2},
        },
    ],
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            UNIVERSAL,
            TopologyAssignment((RACK, HOST), ((("r1", "node-a"), 2), (("r1", "node-b"), 1))),
            id="prefix-individual-counts",
        ),
        pytest.param(
            TWO_SLICES,
            TopologyAssignment((RACK,), ((("r2",), 1), (("r3-x",), 2), (("r4-x",), 2))),
            id="slices-suffix-universal-counts",
        ),
        pytest.param(None, None, id="none"),
    ],
)
def test_assignment_read(raw: dict[str, Any] | None, expected: TopologyAssignment | None) -> None:
    assert topology_assignment(raw) == expected


def workload(assignment: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": kueue.POD_SET, "flavors": {}, "topologyAssignment": assignment}
                ],
            },
        }
    }


def test_pods_pinned_in_rank_order() -> None:
    job = queued_job()
    admission = admission_of(workload(UNIVERSAL), {})
    assert admission.state is Queued.ADMITTED
    pods = admitted_pods(plan_job(job), admission.info).pods
    assert [p["spec"]["nodeSelector"][HOST] for p in pods] == ["node-a", "node-a", "node-b"]
    assert {p["spec"]["nodeSelector"][RACK] for p in pods} == {"r1"}


def test_admitted_job_records_kueues_placement() -> None:
    job = queued_job()
    admission = Admission(
        Queued.ADMITTED, info=PodSetInfo({}, (), {}, {}, topology_assignment(UNIVERSAL))
    )
    decision = decide(inputs(job, queued=True, admission=admission))
    placement = decision.status.placement
    assert placement is not None
    assert placement.summary == "rack r1 (3 pods)"
    assert [p["spec"]["nodeSelector"][HOST] for p in decision.create_pods] == [
        "node-a",
        "node-a",
        "node-b",
    ]


def test_an_assignment_of_hosts_alone_is_counted_by_the_nodes_rack() -> None:
    # Kueue 0.19 names only the lowest level (the host) when it decides the rest.
    hosts = {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 3,
                "valuesPerLevel": [{"individual": {"prefix": "n-", "roots": ["1", "2", "3"]}}],
                "podCounts": {"universal": 1},
            }
        ],
    }
    nodes = [
        {"metadata": {"name": f"n-{i}", "labels": {HOST: f"n-{i}", RACK: rack}}}
        for i, rack in ((1, "r1"), (2, "r1"), (3, "r2"))
    ]
    where = admitted(queued_job(), JobStatus(), topology_assignment(hosts), nodes)
    assert where is not None
    assert where.choice.domains == (("r1", 2), ("r2", 1))
    assert admitted(queued_job(), JobStatus(), topology_assignment(hosts), ()) is None

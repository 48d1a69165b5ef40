"""A queued job's Kueue Workload (plan/workload.py) and its standing in Kueue, read from the
Workload (policy/kube/kueue_admission.py): pure, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api import kueue
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import PlanError, plan_job
from multigpu_operator.plan.workload import (
    PodSetInfo,
    PriorityClass,
    admitted_pods,
    build_workload,
    workload_name,
)
from multigpu_operator.policy.kube.kueue_admission import Admission, Queued, admission_of

FLAVORS: dict[str, dict[str, Any]] = {
    "h100": {
        "spec": {
            "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [{"key": "team-a", "operator": "Exists", "effect": "NoSchedule"}],
        }
    },
    "cpu": {"spec": {"nodeLabels": {"pool": "cpu"}}},
}


def queued_job(queue: str = "team-a", **spec: Any) -> Job:
    return Job.from_object(
        {
            "metadata": {
                "name": "train",
                "namespace": "ns",
                "uid": "uid-1",
                "labels": {kueue.QUEUE_NAME_LABEL: queue},
            },
            "spec": {
                "mode": "DistributedDataParallel",
                "replicas": 3,
                "gpusPerReplica": 8,
                "template": {"spec": {"containers": [{"name": "trainer", "image": "t:1"}]}},
                **spec,
            },
        }
    )


def test_workload_asks_for_every_pod_of_the_job_in_its_queue() -> None:
    job = queued_job()
    workload = build_workload(job, plan_job(job), PriorityClass("high", 1000))
    assert workload["metadata"]["name"] == workload_name(job)
    assert workload["metadata"]["labels"][kueue.JOB_UID_LABEL] == "uid-1"
    assert workload["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    spec = workload["spec"]
    assert spec["queueName"] == "team-a"
    assert spec["priority"] == 1000
    assert spec["priorityClassRef"]["name"] == "high"
    (pod_set,) = spec["podSets"]
    assert pod_set["count"] == 3
    container = pod_set["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "name" not in pod_set["template"]["metadata"]


def test_workload_names_are_deterministic_short_and_distinct() -> None:
    job = queued_job()
    assert workload_name(job) == workload_name(queued_job())
    assert workload_name(job).startswith("multigpujob-train-")
    other = Job.from_object({**_raw(job), "metadata": {**_raw(job)["metadata"], "uid": "uid-2"}})
    assert workload_name(other) != workload_name(job)


def _raw(job: Job) -> dict[str, Any]:
    return {
        "metadata": {
            "name": job.ref.name,
            "namespace": job.ref.namespace,
            "uid": job.ref.uid,
            "labels": {kueue.QUEUE_NAME_LABEL: "team-a"},
        },
        "spec": {"mode": "DataParallel", "template": {"spec": {"containers": [{"name": "t"}]}}},
    }


def condition(ctype: str, reason: str, message: str = "", status: str = "True") -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


ADMISSION = {
    "clusterQueue": "gpus",
    "podSetAssignments": [
        {"name": "workers", "flavors": {"nvidia.com/gpu": "h100", "cpu": "h100"}}
    ],
}
NO_QUOTA = "couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu"


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        pytest.param(
            None, Admission(Queued.NO_WORKLOAD, message="creating its Kueue Workload"), id="none"
        ),
        pytest.param(
            {"status": {}},
            Admission(Queued.PENDING, "Pending", "waiting for Kueue to look at it"),
            id="not-looked-at",
        ),
        pytest.param(
            {"status": {"conditions": [condition("QuotaReserved", "Pending", NO_QUOTA, "False")]}},
            Admission(Queued.PENDING, "Pending", NO_QUOTA),
            id="waiting-for-quota",
        ),
        pytest.param(
            {
                "status": {
                    "admission": ADMISSION,
                    "conditions": [
                        condition("QuotaReserved", "QuotaReserved"),
                        condition("Admitted", "Admitted", "The workload is admitted"),
                    ],
                }
            },
            Admission(
                Queued.ADMITTED,
                "Admitted",
                "The workload is admitted",
                "gpus",
                PodSetInfo(
                    {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    ({"key": "team-a", "operator": "Exists", "effect": "NoSchedule"},),
                    {},
                    {},
                ),
            ),
            id="admitted",
        ),
        pytest.param(
            {
                "status": {
                    "admission": ADMISSION,
                    "conditions": [
                        condition("Admitted", "Admitted"),
                        condition("Evicted", "Preempted", "Preempted to accommodate a workload"),
                    ],
                }
            },
            Admission(Queued.EVICTED, "Preempted", "Preempted to accommodate a workload"),
            id="preempted",
        ),
        pytest.param(
            {"status": {"conditions": [condition("Finished", "Succeeded", "done")]}},
            Admission(Queued.FINISHED, "Succeeded", "done"),
            id="finished",
        ),
    ],
)
def test_admission_of(workload: dict[str, Any] | None, expected: Admission) -> None:
    assert admission_of(workload, FLAVORS) == expected


def test_admission_checks_add_to_what_the_flavors_ask() -> None:
    workload = {
        "status": {
            "admission": {"podSetAssignments": [{"name": "workers", "flavors": {"cpu": "cpu"}}]},
            "conditions": [condition("Admitted", "Admitted")],
            "admissionChecks": [
                {
                    "podSetUpdates": [
                        {"name": "workers", "nodeSelector": {"zone": "a"}, "labels": {"x": "1"}}
                    ]
                }
            ],
        }
    }
    info = admission_of(workload, FLAVORS).info
    assert info.node_selector == {"pool": "cpu", "zone": "a"}
    assert info.labels == {"x": "1"}


def test_admitted_pods_carry_the_flavors_placement() -> None:
    job = queued_job(gpuProduct="NVIDIA-H100-80GB-HBM3")
    info = admission_of(
        {"status": {"admission": ADMISSION, "conditions": [condition("Admitted", "A")]}}, FLAVORS
    ).info
    pods = admitted_pods(plan_job(job), info).pods
    assert len(pods) == 3
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert {"key": "team-a", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"][
            "tolerations"
        ]


def test_a_template_pinned_elsewhere_than_the_admitted_flavor_is_an_error() -> None:
    job = queued_job(gpuProduct="NVIDIA-A100-SXM4-80GB")
    info = PodSetInfo({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, (), {}, {})
    with pytest.raises(PlanError, match="Kueue admitted the job on a flavor"):
        admitted_pods(plan_job(job), info)

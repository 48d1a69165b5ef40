"""Queued jobs against a real Kueue (v0.19, tests/cluster/kueue.py) on the local cluster:
quota, queueing, finishing, priority preemption and a job that can never fit. Kueue's
own status (the Workload) and the job's status must agree at every step.

The manifests are those of docs/kueue.md: a ResourceFlavor, a ClusterQueue of 16 GPUs
shared by two LocalQueues, and two WorkloadPriorityClasses. Cluster-scoped names carry
the test's namespace, so reruns on a kept cluster never collide.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cluster.kueue import Kueue
from cluster.localcluster import LocalCluster
from multigpu_operator.api import kueue
from multigpu_operator.api.spec import API_VERSION
from support.jobs import RUN_LONG, SIM, JobEnv, condition, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.uses_tools("kueue")]

GPUS = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def real_kueue(installed_crd: LocalCluster) -> Iterator[Kueue]:
    controller = Kueue(installed_crd)
    started = not controller.running()
    controller.up()
    yield controller
    if started and not os.environ.get("MGJ_KEEP_CLUSTER"):
        controller.down()


@pytest.fixture
def queued(
    real_kueue: Kueue,
    jobs: JobEnv,
    api_client: client.ApiClient,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Queues]:
    """Kueue's objects for this test, and an operator that queues jobs in Kueue."""
    queues = Queues(jobs, client.CustomObjectsApi(api_client))
    for manifest in queues.manifests():
        jobs.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    proc = OperatorProcess(jobs.cluster.kubeconfig, jobs.namespace, tmp_path / "op.log", kueue="on")
    proc.start()
    yield queues
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"--- operator log ---\n{proc.log()}\n--- kueue log ---\n{real_kueue.log()[-6000:]}")
        print(json.dumps(queues.workloads(), indent=1)[-6000:])
        for job in ("first", "second", "third", "low-1", "low-2", "urgent", "huge"):
            print(job, json.dumps(jobs.status(job) if queues.workload(job) else {}))
    # The jobs go while the operator runs: it releases their Workloads (Kueue's
    # finalizer would otherwise hold the namespace's deletion).
    jobs.cluster.kubectl("delete", "-n", jobs.namespace, "mgj", "--all", "--wait=false")
    wait_for(lambda: not queues.workloads(), "every Workload collected", timeout=60)
    proc.stop()
    for kind, name in queues.cluster_scoped():
        jobs.cluster.kubectl("delete", kind, name, "--wait=false", check=False)


class Queues:
    def __init__(self, jobs: JobEnv, custom: client.CustomObjectsApi) -> None:
        self.jobs = jobs
        self.custom = custom
        suffix = jobs.namespace[-6:]
        self.flavor = f"gpu-{suffix}"
        self.cluster_queue = f"gpus-{suffix}"
        self.low, self.high = f"low-{suffix}", f"high-{suffix}"

    def manifests(self) -> list[dict[str, Any]]:
        """As docs/kueue.md shows them."""
        v = kueue.API_VERSION
        ns = self.jobs.namespace
        return [
            {"apiVersion": v, "kind": "ResourceFlavor", "metadata": {"name": self.flavor}},
            {
                "apiVersion": v,
                "kind": "ClusterQueue",
                "metadata": {"name": self.cluster_queue},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": [GPUS],
                            "flavors": [
                                {
                                    "name": self.flavor,
                                    "resources": [{"name": GPUS, "nominalQuota": 16}],
                                }
                            ],
                        }
                    ],
                },
            },
            *(
                {
                    "apiVersion": v,
                    "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"clusterQueue": self.cluster_queue},
                }
                for name in ("team-a", "team-b")
            ),
            *(
                {
                    "apiVersion": v,
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                }
                for name, value in ((self.low, 100), (self.high, 1000))
            ),
        ]

    def cluster_scoped(self) -> list[tuple[str, str]]:
        return [
            ("clusterqueues.kueue.x-k8s.io", self.cluster_queue),
            ("resourceflavors.kueue.x-k8s.io", self.flavor),
            ("workloadpriorityclasses.kueue.x-k8s.io", self.low),
            ("workloadpriorityclasses.kueue.x-k8s.io", self.high),
        ]

    def submit(self, name: str, queue: str, gpus: int = 8, priority: str | None = None) -> None:
        labels = {kueue.QUEUE_NAME_LABEL: queue}
        if priority:
            labels[kueue.PRIORITY_CLASS_LABEL] = priority
        self.jobs.apply(
            job_manifest(name, replicas=2, gpus=gpus // 2, annotations=RUN_LONG, labels=labels)
        )

    def workloads(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.custom.list_namespaced_custom_object(
            kueue.GROUP, kueue.VERSION, self.jobs.namespace, kueue.WORKLOADS
        )["items"]
        return items

    def workload(self, job: str) -> dict[str, Any]:
        owned = [
            w
            for w in self.workloads()
            if any(r["name"] == job for r in w["metadata"].get("ownerReferences", []))
        ]
        return owned[0] if owned else {}

    def kueue_condition(self, job: str, ctype: str) -> dict[str, Any]:
        return condition(self.workload(job).get("status") or {}, ctype)

    def running(self, job: str) -> bool:
        status = self.jobs.status(job)
        admitted = self.kueue_condition(job, kueue.ADMITTED).get("status") == "True"
        return bool(status.get("phase") == "Running" and admitted)

    def waiting(self, job: str, reason: str) -> dict[str, Any] | None:
        """The job's status while it waits with `reason` and Kueue agrees it is not
        admitted (its QuotaReserved False, with the message the job shows)."""
        status = self.jobs.status(job)
        reserved = self.kueue_condition(job, kueue.QUOTA_RESERVED)
        if status.get("phase") != "Suspended" or status.get("reason") != reason:
            return None
        if reserved.get("status") != "False" or self.jobs.pods(job):
            return None
        return status

    def finish(self, job: str) -> None:
        for pod in self.jobs.pods(job):
            self.jobs.annotate(pod.metadata.name, {f"{SIM}/succeed-after": "0s"})


def test_quota_admits_two_of_three_jobs_and_the_third_when_one_finishes(
    queued: Queues,
) -> None:
    queued.submit("first", "team-a")
    wait_for(lambda: queued.running("first"), "first running", timeout=60)
    queued.submit("second", "team-b")
    wait_for(lambda: queued.running("second"), "second running", timeout=60)
    queued.submit("third", "team-a")

    def waits_for_quota() -> tuple[dict[str, Any], str] | None:
        # Kueue's message, and ours quoting it (Kueue rewrites it as it retries).
        status = queued.waiting("third", "WaitingForAdmission")
        kueue_message = queued.kueue_condition("third", kueue.QUOTA_RESERVED).get("message", "")
        ours = condition(status or {}, "Suspended").get("message", "")
        if status is None or "insufficient unused quota for nvidia.com/gpu" not in kueue_message:
            return None
        return (status, str(kueue_message)) if ours.endswith(kueue_message) else None

    status, kueue_message = wait_for(waits_for_quota, "third waiting for quota", timeout=60)
    assert condition(status, "Suspended")["message"] == (
        f"waiting for Kueue to admit the job from queue team-a: {kueue_message}"
    )
    queued.finish("first")
    queued.jobs.wait_phase("first", "Succeeded", timeout=60)
    finished = wait_for(
        lambda: queued.kueue_condition("first", kueue.FINISHED), "first's Workload finished"
    )
    assert finished["reason"] == "Succeeded"
    wait_for(lambda: queued.running("third"), "third running", timeout=60)
    third = queued.jobs.status("third")
    assert third["attempt"] == 1
    assert third["restarts"] == 0


def test_a_higher_priority_job_preempts_a_lower_one_which_resumes_later(
    queued: Queues,
) -> None:
    queued.submit("low-1", "team-a", priority=queued.low)
    wait_for(lambda: queued.running("low-1"), "low-1 running", timeout=60)
    queued.submit("low-2", "team-a", priority=queued.low)
    wait_for(lambda: queued.running("low-2"), "low-2 running", timeout=60)
    queued.submit("urgent", "team-b", priority=queued.high)
    wait_for(lambda: queued.running("urgent"), "urgent running", timeout=90)
    preempted = [
        name for name in ("low-1", "low-2") if queued.jobs.status(name).get("reason") == "Preempted"
    ]
    assert len(preempted) == 1, {n: queued.jobs.status(n) for n in ("low-1", "low-2")}
    victim = preempted[0]
    status = wait_for(lambda: queued.waiting(victim, "Preempted"), f"{victim} preempted")
    evicted = queued.kueue_condition(victim, kueue.EVICTED)
    assert evicted["reason"] == "Preempted"
    assert evicted["message"] in condition(status, "Suspended")["message"]
    assert status["restarts"] == 0
    assert not condition(status, "Failed")
    queued.finish("urgent")
    wait_for(lambda: queued.running(victim), f"{victim} running again", timeout=90)
    resumed = queued.jobs.status(victim)
    assert resumed["attempt"] == 2  # a fresh attempt: the trainer resumes from checkpoints
    assert resumed["restarts"] == 0


def test_a_job_that_can_never_fit_the_quota_says_so(queued: Queues) -> None:
    queued.submit("huge", "team-a", gpus=24)

    def says_so() -> dict[str, Any] | None:
        status = queued.waiting("huge", "WaitingForAdmission")
        message = condition(status or {}, "Suspended").get("message", "")
        return status if "maximum capacity" in message else None

    status = wait_for(says_so, "huge's status naming the quota's capacity")
    kueue_message = queued.kueue_condition("huge", kueue.QUOTA_RESERVED)["message"]
    assert "(24) > maximum capacity (16)" in kueue_message
    assert kueue_message in condition(status, "Suspended")["message"]


def test_a_deleted_job_leaves_no_workload_behind(queued: Queues) -> None:
    queued.submit("gone", "team-a")
    wait_for(lambda: queued.running("gone"), "gone running", timeout=60)
    finalizers = queued.workload("gone")["metadata"].get("finalizers", [])
    assert kueue.RESOURCE_IN_USE_FINALIZER in finalizers
    queued.jobs.cluster.kubectl("delete", "-n", queued.jobs.namespace, "mgj/gone")
    wait_for(lambda: not queued.workload("gone"), "gone's Workload collected", timeout=60)


def test_a_queue_taken_from_the_runtime_is_admitted(queued: Queues) -> None:
    """A job without a queue label, on a runtime that names one (docs/runtimes.md), is
    queued there and admitted by Kueue on the runtime's GPUs."""
    runtime = f"queued-{queued.jobs.namespace[-6:]}"
    template = {
        "metadata": {"annotations": dict(RUN_LONG)},
        "spec": {"containers": [{"name": "trainer", "image": "trainer:test"}]},
    }
    body = {
        "apiVersion": API_VERSION,
        "kind": "ClusterMultiGPURuntime",
        "metadata": {"name": runtime},
        "spec": {
            "mode": "DistributedDataParallel",
            "gpusPerReplica": 4,
            "queueName": "team-a",
            "template": template,
        },
    }
    cluster = queued.jobs.cluster
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(body))
    try:
        job = {
            "apiVersion": body["apiVersion"],
            "kind": "MultiGPUJob",
            "metadata": {"name": "from-runtime"},
            "spec": {"runtimeRef": {"name": runtime}, "replicas": 2},
        }
        queued.jobs.apply(job)
        wait_for(lambda: queued.running("from-runtime"), "from-runtime admitted", timeout=60)
        workload = queued.workload("from-runtime")
        assert workload["spec"]["queueName"] == "team-a"
        (pod_set,) = workload["spec"]["podSets"]
        assert pod_set["count"] == 2
    finally:
        cluster.kubectl("delete", "clustermultigpuruntimes", runtime, "--wait=false")

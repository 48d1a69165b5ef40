"""MultiKueue with two local clusters: a job submitted to the manager with
`spec.managedBy: kueue.x-k8s.io/multikueue` runs on the worker under the operator there,
and its status is mirrored back onto the manager's job.

The worker is the tests' cluster (TEST_NAME); the manager is a second cluster started by
the same script (MANAGER_NAME), with Kueue's MultiKueue and its generic adapter for
MultiGPUJob (tests/cluster/kueue.py, manager mode). The manifests are docs/kueue.md's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from cluster.kueue import NAMESPACE as KUEUE_NAMESPACE
from cluster.kueue import Kueue
from cluster.localcluster import MANAGER_NAME, LocalCluster
from cluster.tools import build_tools
from multigpu_operator.api import kueue
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.jobs import SIM, JobEnv, condition, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.uses_tools("kueue")]

REPO = Path(__file__).resolve().parents[2]
GPUS = "nvidia.com/gpu"
WORKER = "worker"


@pytest.fixture(scope="module")
def manager() -> Iterator[LocalCluster]:
    """The manager cluster, with the MultiGPUJob CRD and Kueue in MultiKueue manager mode."""
    cluster = LocalCluster(build_tools(), MANAGER_NAME)
    reused = cluster.is_healthy()
    cluster.up(gpu_nodes=0, cpu_nodes=0, real_node=False)
    cluster.install_crds(REPO / "manifests/crd")  # waits until Established
    Kueue(cluster, manager=True).up()
    yield cluster
    if not reused and not os.environ.get("MGJ_KEEP_CLUSTER"):
        cluster.down()


@pytest.fixture(scope="module")
def worker_kueue(installed_crd: LocalCluster) -> Kueue:
    controller = Kueue(installed_crd)
    controller.up()
    return controller


def queue_objects(suffix: str, namespace: str, check: str | None) -> list[dict[str, Any]]:
    """A flavor, a 16-GPU ClusterQueue (with the MultiKueue admission check on the
    manager) and the LocalQueue team-a."""
    v = kueue.API_VERSION
    cluster_queue: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "resourceGroups": [
            {
                "coveredResources": [GPUS],
                "flavors": [
                    {"name": f"gpu-{suffix}", "resources": [{"name": GPUS, "nominalQuota": 16}]}
                ],
            }
        ],
    }
    if check:
        cluster_queue["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    return [
        {"apiVersion": v, "kind": "ResourceFlavor", "metadata": {"name": f"gpu-{suffix}"}},
        {
            "apiVersion": v,
            "kind": "ClusterQueue",
            "metadata": {"name": f"gpus-{suffix}"},
            "spec": cluster_queue,
        },
        {
            "apiVersion": v,
            "kind": "LocalQueue",
            "metadata": {"name": "team-a", "namespace": namespace},
            "spec": {"clusterQueue": f"gpus-{suffix}"},
        },
    ]


def multikueue_objects(suffix: str, worker_kubeconfig: str) -> list[dict[str, Any]]:
    """The worker's kubeconfig as a Secret, a MultiKueueCluster reading it, a
    MultiKueueConfig of that one cluster and the AdmissionCheck that uses it."""
    v = kueue.API_VERSION
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{WORKER}-{suffix}", "namespace": KUEUE_NAMESPACE},
            "stringData": {"kubeconfig": worker_kubeconfig},
        },
        {
            "apiVersion": v,
            "kind": "MultiKueueCluster",
            "metadata": {"name": f"{WORKER}-{suffix}"},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {"locationType": "Secret", "location": f"{WORKER}-{suffix}"}
                }
            },
        },
        {
            "apiVersion": v,
            "kind": "MultiKueueConfig",
            "metadata": {"name": f"multikueue-{suffix}"},
            "spec": {"clusters": [f"{WORKER}-{suffix}"]},
        },
        {
            "apiVersion": v,
            "kind": "AdmissionCheck",
            "metadata": {"name": f"multikueue-{suffix}"},
            "spec": {
                "controllerName": kueue.MULTIKUEUE_CONTROLLER,
                "parameters": {
                    "apiGroup": kueue.GROUP,
                    "kind": "MultiKueueConfig",
                    "name": f"multikueue-{suffix}",
                },
            },
        },
    ]


def apply_all(cluster: LocalCluster, objects: list[dict[str, Any]]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": objects}
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(items))


def test_a_job_submitted_to_the_manager_runs_on_the_worker_and_reports_back(
    manager: LocalCluster,
    worker_kueue: Kueue,
    jobs: JobEnv,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    namespace, suffix = jobs.namespace, jobs.namespace[-6:]
    worker = jobs.cluster
    apply_all(worker, queue_objects(f"w-{suffix}", namespace, None))
    manager.kubectl("create", "namespace", namespace)
    flat = worker.kubectl("config", "view", "--raw", "--flatten", "--minify").stdout
    apply_all(manager, multikueue_objects(suffix, flat))
    apply_all(manager, queue_objects(f"m-{suffix}", namespace, f"multikueue-{suffix}"))
    operators = [
        OperatorProcess(cluster.kubeconfig, namespace, tmp_path / f"{name}.log", kueue="on")
        for name, cluster in (("worker", worker), ("manager", manager))
    ]
    manager_api = client.CustomObjectsApi(
        config.new_client_from_config(config_file=str(manager.kubeconfig))
    )

    def on_manager(plural: str = PLURAL, group: str = GROUP, version: str = VERSION) -> Any:
        return manager_api.list_namespaced_custom_object(group, version, namespace, plural)["items"]

    try:
        for operator in operators:
            operator.start()
        job = job_manifest(
            "dispatched",
            replicas=2,
            gpus=4,
            annotations={f"{SIM}/succeed-after": "600s"},
            labels={kueue.QUEUE_NAME_LABEL: "team-a"},
            managedBy=kueue.MULTIKUEUE_CONTROLLER,
        )
        manager.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(job))
        # The worker's copy: MultiKueue's, without managedBy, following its prebuilt Workload.
        running = wait_for(lambda: jobs.running("dispatched", 2), "pods on the worker", 90)
        assert all(p.spec.node_name for p in running)
        copy = worker.kubectl("get", "-n", namespace, "mgj/dispatched", "-o", "json").stdout
        meta = json.loads(copy)["metadata"]
        assert kueue.PREBUILT_WORKLOAD_LABEL in meta.get("annotations", meta["labels"])
        # Only MultiKueue's Workload: the worker's operator made none of its own.
        workloads = worker.kubectl("get", "-n", namespace, "workloads", "-o", "name").stdout
        assert len(workloads.split()) == 1, workloads
        assert "managedBy" not in json.loads(copy)["spec"]

        def mirrored(phase: str) -> dict[str, Any] | None:
            (mine,) = on_manager()
            status: dict[str, Any] = mine.get("status") or {}
            return status if status.get("phase") == phase else None

        status = wait_for(lambda: mirrored("Running"), "the manager's job Running", 60)
        assert condition(status, "Running")["status"] == "True"
        assert status["worldSize"] == 8
        assert job_pods_on(manager, namespace) == []  # the manager's operator made none
        for pod in running:
            jobs.annotate(pod.metadata.name, {f"{SIM}/succeed-after": "0s"})
        jobs.wait_phase("dispatched", "Succeeded", 60)
        done = wait_for(lambda: mirrored("Succeeded"), "the manager's job Succeeded", 60)
        assert condition(done, "Succeeded")["status"] == "True"

        def manager_workload_finished() -> bool:
            workloads = on_manager(kueue.WORKLOADS, kueue.GROUP, kueue.VERSION)
            return bool(
                workloads
                and condition(workloads[0].get("status") or {}, kueue.FINISHED).get("status")
                == "True"
            )

        wait_for(manager_workload_finished, "the manager's Workload Finished", 60)
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for operator in operators:
                print(f"--- {operator.kubeconfig} ---\n{operator.log()[-5000:]}")
            print(Kueue(manager, manager=True).log()[-8000:])
        for operator in operators:
            operator.stop()
        manager.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        for cluster, objects in (
            (worker, queue_objects(f"w-{suffix}", namespace, None)),
            (manager, queue_objects(f"m-{suffix}", namespace, f"multikueue-{suffix}")),
            (manager, multikueue_objects(suffix, "")),
        ):
            for obj in objects:
                if obj["kind"] not in ("LocalQueue", "Secret"):
                    kind = f"{obj['kind'].lower()}s.{kueue.GROUP}"
                    name = obj["metadata"]["name"]
                    cluster.kubectl("delete", kind, name, "--wait=false", check=False)


def job_pods_on(cluster: LocalCluster, namespace: str) -> list[str]:
    """The job's pods on `cluster` (none may run on the manager)."""
    out = cluster.kubectl(
        "get", "pods", "-n", namespace, "-l", "multigpu.dev/job-name", "-o", "name"
    ).stdout
    return out.split()

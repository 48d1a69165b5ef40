"""The operator, as a real process, against the real control plane.

Each example job is applied with kubectl; the pods, Service and env the API server
holds are compared with what the planner says (the same code `mgj render` runs),
kwok runs the pods, and the job's status follows them to Succeeded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import plan_job
from support.events import wait_event
from support.jobs import apply, job_manifest, job_phase, job_pods, read_job
from support.operator_process import OperatorProcess
from support.waiting import wait_for

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))


def env_of(container: dict[str, Any]) -> dict[str, str]:
    """Env as name -> value, or -> 'fieldRef:<path>' for downward-API values."""
    out = {}
    for var in container.get("env", []):
        if "valueFrom" in var:
            out[var["name"]] = "fieldRef:" + var["valueFrom"]["fieldRef"]["fieldPath"]
        else:
            out[var["name"]] = var.get("value", "")
    return out


def trainer(pod: dict[str, Any]) -> dict[str, Any]:
    containers = pod["spec"]["containers"]
    return next((c for c in containers if c["name"] == "trainer"), containers[0])


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_to_success_with_planned_pods_service_and_env(
    example: Path,
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    manifest = yaml.safe_load(example.read_text())
    name = manifest["metadata"]["name"]
    installed_crd.kubectl("apply", "-n", namespace, "-f", str(example))

    job = read_job(api_client, namespace, name)
    desired = plan_job(Job.from_object(job))
    wait_for(
        lambda: len(job_pods(core, namespace, name)) == len(desired.pods),
        f"{len(desired.pods)} pods",
    )
    actual = [api_client.sanitize_for_serialization(p) for p in job_pods(core, namespace, name)]
    for want, got in zip(desired.pods, actual, strict=True):
        assert got["metadata"]["name"] == want["metadata"]["name"]
        assert env_of(trainer(got)) == env_of(trainer(want))
        assert trainer(got).get("resources", {}).get("limits") == trainer(want).get(
            "resources", {}
        ).get("limits")
        assert got["spec"]["hostname"] == want["spec"]["hostname"]
        assert got["spec"]["subdomain"] == want["spec"]["subdomain"]
        assert got["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    service = core.read_namespaced_service(name, namespace)
    assert service.spec.cluster_ip == "None"
    assert service.spec.publish_not_ready_addresses is True

    wait_for(lambda: job_phase(api_client, namespace, name) == "Running", "job Running", 60)
    for pod in job_pods(core, namespace, name):
        core.patch_namespaced_pod(
            pod.metadata.name,
            namespace,
            {"metadata": {"annotations": {"sim.multigpu.dev/succeed-after": "0s"}}},
        )
    wait_for(lambda: job_phase(api_client, namespace, name) == "Succeeded", "job Succeeded")

    status = read_job(api_client, namespace, name)["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Succeeded"]["status"] == "True"
    assert conditions["Created"]["status"] == "True"
    assert conditions["Running"]["status"] == "False"
    assert status["pods"]["succeeded"] == len(desired.pods)
    assert status["completionTime"] >= status["startTime"]
    if desired.world_size is not None:
        assert status["worldSize"] == desired.world_size


def test_operator_killed_while_creating_pods_leaves_no_duplicate_or_missing_pod(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    # A pod quota stops creation part-way, deterministically; the operator is killed
    # there, the quota lifted, and a new operator process must finish the job.
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"}}
    apply(installed_crd, namespace, {**quota, "spec": {"hard": {"pods": "5"}}})
    apply(installed_crd, namespace, job_manifest("big", replicas=16, gpus=1))
    wait_for(lambda: len(job_pods(core, namespace, "big")) == 5, "5 of 16 pods")
    before = {p.metadata.name: p.metadata.uid for p in job_pods(core, namespace, "big")}

    operator.kill()
    apply(installed_crd, namespace, {**quota, "spec": {"hard": {"pods": "100"}}})
    operator.start()

    wait_for(lambda: len(job_pods(core, namespace, "big")) >= 16, "16 pods", timeout=60)
    pods = job_pods(core, namespace, "big")
    assert sorted(p.metadata.name for p in pods) == sorted(f"big-{i}" for i in range(16))
    # The pods created before the kill are the same objects, not replacements.
    assert {n: u for n, u in ((p.metadata.name, p.metadata.uid) for p in pods) if n in before} == (
        before
    )


def test_template_conflict_fails_the_job_with_a_message_naming_the_field(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    clash = job_manifest("clash", gpus=1)
    clash["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "WORLD_SIZE", "value": "2"}
    ]
    # A second conflict: both are reported at once.
    clash["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 2}
    }
    apply(installed_crd, namespace, clash)

    wait_for(lambda: job_phase(api_client, namespace, "clash") == "Failed", "job Failed")
    failed = next(
        c
        for c in read_job(api_client, namespace, "clash")["status"]["conditions"]
        if c["type"] == "Failed"
    )
    assert failed["reason"] == "InvalidSpec"
    assert "env[WORLD_SIZE]" in failed["message"]
    assert (
        "resources.limits[nvidia.com/gpu]: is 2, but spec.gpusPerReplica is 1"
        in (failed["message"])
    )
    assert not job_pods(core, namespace, "clash")
    wait_event(api_client, namespace, "InvalidSpec", regarding="clash", type_="Warning")


def test_metrics_report_jobs_by_phase_pod_info_and_latencies(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    apply(installed_crd, namespace, job_manifest("watched", gpus=2))
    wait_for(lambda: job_phase(api_client, namespace, "watched") == "Running", "job Running")

    text = operator.metrics()

    assert 'mgj_jobs{phase="Running"} 1.0' in text
    for replica in (0, 1):
        assert (
            f'mgj_job_pod_info{{job="watched",namespace="{namespace}",'
            f'pod="watched-{replica}",replica="{replica}"}} 1.0'
        ) in text
    assert "mgj_pods_created_total 2.0" in text
    assert (
        f'mgj_jobs_created_total{{mode="DistributedDataParallel",namespace="{namespace}"}} 1.0'
        in text
    )
    assert (
        f'mgj_job_time_to_running_seconds_count{{mode="DistributedDataParallel",'
        f'namespace="{namespace}"}} 1.0'
    ) in text
    assert "mgj_reconcile_duration_seconds_count" in text

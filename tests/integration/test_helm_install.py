"""`helm install` on the local cluster; the operator then runs with the chart's
ServiceAccount token only, so the chart's RBAC is exactly what it is allowed to do.

The operator this test checks runs as a local process with that token, so its log and
metrics can be read (`make demo` runs it as a pod on the real node instead); the chart's
Deployment pod is still created, admitted (Pod Security restricted) and run by a kwok node,
and `helm test` runs its hook pod.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cluster.images import TRAINER_IMAGE
from cluster.localcluster import LocalCluster
from cluster.realnode_config import NODE_KIND, NODE_KIND_LABEL, NODE_NAME
from support.chart import helm, installed
from support.jobs import job_status
from support.operator_log import reconcile_errors, refusals, troubles
from support.operator_looks import api_requests
from support.operator_process import OperatorProcess
from support.real_pods import RESTRICTED_CONTAINER, TOLERATION, pod_log, unpushed_images
from support.service_account import service_account_kubeconfig
from support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
# CPU-only: it does not wait for GPUs that other jobs on the shared test cluster hold.
EXAMPLE = REPO / "examples/cpu-ddp.yaml"
# The job of about ten lines on the chart's cpu-ddp runtime (docs/runtimes.md).
RUNTIME_EXAMPLE = REPO / "examples/runtimes/ddp.yaml"
# What kubectl auth can-i calls the resources that mgj_api_requests_total counts.
RESOURCE_NAMES = {
    "pods": ("pods", None),
    "services": ("services", None),
    "events": ("events.events.k8s.io", None),  # the operator posts events.k8s.io/v1 Events
    "multigpujobs": ("multigpujobs.multigpu.dev", None),
    "multigpujobs/status": ("multigpujobs.multigpu.dev", "status"),
}


def release_of(namespace: str) -> str:
    return f"mgj-{namespace[-6:]}"


def full_name(namespace: str) -> str:
    return f"{release_of(namespace)}-multigpu-operator"


@pytest.fixture
def release(installed_crd: LocalCluster, namespace: str) -> Iterator[str]:
    """The chart installed into this test's namespace (which enforces Pod Security
    restricted), with the helm test pod scripted to succeed under kwok."""
    installed_crd.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )
    with installed(
        installed_crd, installed_crd.tools, release_of(namespace), namespace,
        "--set-string", "tests.podAnnotations.sim\\.multigpu\\.dev/succeed-after=1s",
        "--wait", "--timeout", "60s",
    ):  # fmt: skip
        yield release_of(namespace)


def start_operator_as_chart_account(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> OperatorProcess:
    kubeconfig = service_account_kubeconfig(
        cluster, namespace, full_name(namespace), tmp_path / "operator.kubeconfig"
    )
    # With leader election on the chart's Lease: the chart's Role must allow it.
    election = {"MGJ_LEADER_ELECTION": "true", "MGJ_LEASE_NAME": full_name(namespace)}
    operator = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log", election)
    operator.start()
    return operator


def apply_example(cluster: LocalCluster, namespace: str) -> str:
    """The example, with the security context a restricted namespace demands."""
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    template = job["spec"]["template"]["spec"]
    template["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for container in template["containers"]:
        container["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(job))
    return str(job["metadata"]["name"])


def can_i(cluster: LocalCluster, namespace: str, verb: str, resource: str) -> bool:
    name, subresource = RESOURCE_NAMES.get(resource, (resource, None))
    account = f"system:serviceaccount:{namespace}:{full_name(namespace)}"
    args = ["auth", "can-i", verb, name, "-n", namespace, f"--as={account}"]
    if subresource:
        args.append(f"--subresource={subresource}")
    return cluster.kubectl(*args, check=False).stdout.strip() == "yes"


def test_chart_installs_and_its_service_account_runs_a_job(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    release: str,
    tmp_path: Path,
) -> None:
    tested = helm(
        installed_crd.tools, "test", release, "-n", namespace,
        "--kubeconfig", str(installed_crd.kubeconfig), "--timeout", "60s",
    )  # fmt: skip
    assert "Phase:          Succeeded" in tested.stdout
    operator = start_operator_as_chart_account(installed_crd, namespace, tmp_path)
    try:
        name = apply_example(installed_crd, namespace)
        wait_for(
            lambda: job_status(api_client, namespace, name).get("phase") == "Running",
            "the example job Running under the chart's RBAC",
        )
        used = api_requests(operator.metrics())
    finally:
        operator.stop()
    assert {("create", "pods"), ("create", "services"), ("patch", "multigpujobs/status")} <= used
    denied = {request for request in used if not can_i(installed_crd, namespace, *request)}
    assert not denied, f"the chart's ClusterRole lacks {denied}"
    # The check can say no: the account may not create Deployments.
    assert not can_i(installed_crd, namespace, "create", "deployments")
    assert refusals(operator) == [], operator.log()


def refused(operator: OperatorProcess) -> bool:
    """The operator logged a reconcile error for a 403 answer (controller/workers.py's format)."""
    return any(re.search(r" failed: HTTP 403: ", line) for line in troubles(operator))


def test_a_permission_missing_from_the_chart_stops_the_job_and_is_reported(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    release: str,
    tmp_path: Path,
) -> None:
    role = json.loads(
        installed_crd.kubectl("get", "clusterrole", full_name(namespace), "-o", "json").stdout
    )
    index = next(i for i, rule in enumerate(role["rules"]) if rule["resources"] == ["pods"])
    verbs = [verb for verb in role["rules"][index]["verbs"] if verb != "create"]
    patch = [{"op": "replace", "path": f"/rules/{index}/verbs", "value": verbs}]
    installed_crd.kubectl(
        "patch", "clusterrole", full_name(namespace), "--type=json", "-p", json.dumps(patch)
    )
    operator = start_operator_as_chart_account(installed_crd, namespace, tmp_path)
    try:
        name = apply_example(installed_crd, namespace)
        wait_for(lambda: refused(operator), "the operator to report Forbidden")
        assert reconcile_errors(operator) > 0
    finally:
        operator.stop()
    pods = client.CoreV1Api(api_client).list_namespaced_pod(
        namespace, label_selector=f"multigpu.dev/job-name={name}"
    )
    assert pods.items == []
    assert job_status(api_client, namespace, name).get("phase") != "Running"
    # RBAC's refusal, not another one (the API error body is logged as escaped JSON).
    assert re.search(r'cannot create resource \\?"pods\\?"', operator.log())


def test_the_default_runtimes_train_the_ten_line_example_on_the_real_node(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    release: str,
    tmp_path: Path,
) -> None:
    """`helm install` puts the default runtimes in (values runtimes.defaultEnabled); the
    ten-line example names cpu-ddp, whose image, command and launcher the runtime holds, and
    trains on the real node's real pods, with what this namespace and node ask besides."""
    missing = unpushed_images(installed_crd)
    assert not missing, f"{missing} not in the local registry: run `make images` first"
    listed = installed_crd.kubectl("get", "clustermultigpuruntimes", "-o", "name").stdout
    assert {"cpu-ddp", "gpu-ddp", "elastic"} <= {n.rsplit("/", 1)[-1] for n in listed.split()}
    job: dict[str, Any] = yaml.safe_load(RUNTIME_EXAMPLE.read_text())
    pod = job["spec"]["template"]["spec"]
    pod["nodeSelector"] = {NODE_KIND_LABEL: NODE_KIND}
    pod["tolerations"] = [TOLERATION]
    (trainer,) = pod["containers"]
    trainer["securityContext"] = RESTRICTED_CONTAINER
    trainer["resources"] = {"requests": {"cpu": "100m", "memory": "1Gi"}}
    name = job["metadata"]["name"]
    operator = start_operator_as_chart_account(installed_crd, namespace, tmp_path)
    try:
        installed_crd.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(job))

        def finished() -> dict[str, Any] | None:
            status = job_status(api_client, namespace, name)
            return status if status.get("phase") in ("Succeeded", "Failed") else None

        status = wait_for(finished, f"{name} finished on the real node", timeout=600)
    finally:
        operator.stop()
    assert status["phase"] == "Succeeded", status
    assert (status["runtime"]["name"], status["runtime"]["kind"]) == (
        "cpu-ddp",
        "ClusterMultiGPURuntime",
    )
    for rank in range(2):
        pod_name = f"{name}-{rank}"
        log = pod_log(installed_crd, namespace, pod_name)
        assert f"rank={rank}/2" in log, log[-2000:]
        assert "final test_accuracy=" in log, log[-2000:]
        placed = client.CoreV1Api(api_client).read_namespaced_pod(pod_name, namespace)
        assert placed.spec.node_name == NODE_NAME
        assert placed.spec.containers[0].image == TRAINER_IMAGE  # the runtime's
    assert refusals(operator) == [], operator.log()

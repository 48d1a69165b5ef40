"""The chart against the real API server: every rendered object passes a server-side
dry-run (the monitoring kinds against the Prometheus Operator's own CRDs), and the operator
pod and trainer pods are admitted by Pod Security "restricted"."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.localcluster import LocalCluster
from support.chart import ALL_ENABLED_VALUES, Manifest, find, only, render
from support.monitoring_crds import monitoring_crd_files

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
RESTRICTED_POD = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.fixture(scope="module")
def monitoring_crds(installed_crd: LocalCluster) -> LocalCluster:
    """ServiceMonitor, PodMonitor and PrometheusRule CRDs, so their objects are validated."""
    files = [arg for path in monitoring_crd_files() for arg in ("-f", str(path))]
    installed_crd.kubectl("apply", "--server-side", "--force-conflicts", *files)
    installed_crd.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")
    return installed_crd


def dry_run(cluster: LocalCluster, namespace: str, objects: list[Manifest]) -> str:
    """Server-side apply, dry run: schema, strict field validation and admission, no change."""
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    result = cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "--dry-run=server",
        "-n", namespace, "-f", "-", stdin=body, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("values", [[], ["-f", str(ALL_ENABLED_VALUES)]], ids=["default", "all"])
def test_rendered_chart_passes_a_server_side_dry_run(
    monitoring_crds: LocalCluster, namespace: str, values: list[str]
) -> None:
    objects = render(monitoring_crds.tools, "--include-crds", *values, namespace=namespace)
    out = dry_run(monitoring_crds, namespace, objects)
    assert out.count("(server dry run)") == len(objects)
    if values:
        assert {"ServiceMonitor", "PodMonitor", "PrometheusRule"} <= {o["kind"] for o in objects}


def enforce_restricted(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )


def create_pods(
    cluster: LocalCluster, namespace: str, pods: list[Manifest]
) -> subprocess.CompletedProcess[str]:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    return cluster.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-f", "-", stdin=body, check=False
    )


def operator_pods(cluster: LocalCluster, namespace: str) -> list[Manifest]:
    """The Deployment's pod, as its ReplicaSet would create it, and the helm test pod."""
    objects = render(cluster.tools, namespace=namespace)
    template = only(objects, "Deployment")["spec"]["template"]
    deployment_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator", **template["metadata"]},
        "spec": template["spec"],
    }
    return [deployment_pod, *find(objects, "Pod")]


def test_operator_pods_pass_pod_security_restricted(
    installed_crd: LocalCluster, namespace: str
) -> None:
    enforce_restricted(installed_crd, namespace)
    pods = operator_pods(installed_crd, namespace)
    account = pods[0]["spec"]["serviceAccountName"]
    installed_crd.kubectl("create", "serviceaccount", account, "-n", namespace)
    admitted = create_pods(installed_crd, namespace, pods)
    assert admitted.returncode == 0, admitted.stderr
    assert "Warning" not in admitted.stderr
    # The namespace really enforces: the same pod without its security context is refused.
    bare = copy.deepcopy(pods[0])
    del bare["spec"]["securityContext"]
    del bare["spec"]["containers"][0]["securityContext"]
    refused = create_pods(installed_crd, namespace, [bare])
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr


def rendered_trainer_pods(namespace: str, tmp_path: Path, restricted: bool) -> list[Manifest]:
    """`mgj render` of every example, each template given a restricted security context."""
    jobs: list[dict[str, Any]] = [yaml.safe_load(example.read_text()) for example in EXAMPLES]
    for job in jobs:
        template = job["spec"]["template"]["spec"]
        if restricted:
            template["securityContext"] = RESTRICTED_POD
            for container in template["containers"]:
                container["securityContext"] = RESTRICTED_CONTAINER
    path = tmp_path / "examples.yaml"
    path.write_text(yaml.safe_dump_all(jobs))
    out = subprocess.run(
        [sys.executable, "-m", "multigpu_operator.cli", "render", str(path), "-n", namespace],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [obj for obj in yaml.safe_load_all(out) if obj and obj["kind"] == "Pod"]


def test_trainer_pods_of_every_mode_pass_pod_security_restricted_with_a_restricted_template(
    installed_crd: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    enforce_restricted(installed_crd, namespace)
    pods = rendered_trainer_pods(namespace, tmp_path, restricted=True)
    modes = {pod["metadata"]["labels"]["multigpu.dev/mode"] for pod in pods}
    assert modes == {"DataParallel", "DistributedDataParallel", "ModelParallel", "Elastic"}
    admitted = create_pods(installed_crd, namespace, pods)
    assert admitted.returncode == 0, admitted.stderr
    # What the operator adds (/dev/shm emptyDir, env, downward API, tolerations, hostname)
    # needs nothing beyond restricted; only the template's own security context decides.
    plain = rendered_trainer_pods(namespace, tmp_path, restricted=False)
    refused = create_pods(installed_crd, namespace, plain)
    assert refused.stderr.count("violates PodSecurity") == len(plain)

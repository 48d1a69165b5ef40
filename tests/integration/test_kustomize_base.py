"""manifests/ (the kustomize base that `kubectl apply -k` installs) on a real API server:
every object it renders is accepted, and the operator's pod passes Pod Security."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cluster.localcluster import LocalCluster

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]


def rehome(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A manifest moved from multigpu-system into `namespace`."""
    doc = copy.deepcopy(doc)
    if doc["metadata"].get("namespace"):
        doc["metadata"]["namespace"] = namespace
    for subject in doc.get("subjects", []):
        subject["namespace"] = namespace
    return doc


def test_kustomize_base_installs_on_the_server(
    local_cluster: LocalCluster, core: client.CoreV1Api, namespace: str
) -> None:
    rendered = local_cluster.kubectl("kustomize", str(REPO / "manifests")).stdout
    docs = list(yaml.safe_load_all(rendered))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == [
        "ClusterRole",
        "ClusterRole",  # users read runtimes (aggregated into view, edit, admin)
        "ClusterRoleBinding",
        *["CustomResourceDefinition"] * 3,  # MultiGPUJob and the two runtime kinds
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Role",  # the leader election's Lease
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    # A server-side dry run cannot create objects in a namespace that a dry run "created",
    # so everything namespaced goes into this test's namespace, which gets the same
    # Pod Security labels as the real one.
    (ns_doc,) = (d for d in docs if d["kind"] == "Namespace")
    core.patch_namespace(namespace, {"metadata": {"labels": ns_doc["metadata"]["labels"]}})
    objects = [rehome(d, namespace) for d in docs if d["kind"] != "Namespace"]

    applied = local_cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(objects),
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert "PodSecurity" not in applied.stderr

    # Pod Security enforcement judges pods, not Deployments: admit the operator's pod.
    # The pod's service account must exist; it goes away with the test namespace.
    (account,) = (d for d in objects if d["kind"] == "ServiceAccount")
    core.create_namespaced_service_account(namespace, account)
    (deployment,) = (d for d in objects if d["kind"] == "Deployment")
    pod = {"apiVersion": "v1", "kind": "Pod", **deployment["spec"]["template"]}
    pod["metadata"] = {**pod["metadata"], "name": "operator-dry-run"}
    core.create_namespaced_pod(namespace, pod, dry_run="All")

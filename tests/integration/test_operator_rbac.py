"""The operator works with exactly the permissions manifests/rbac grants it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.events import wait_event
from support.jobs import SIM, apply, job_manifest
from support.operator_log import reconcile_errors, refusals
from support.operator_process import OperatorProcess
from support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
SERVICE_ACCOUNT = ("multigpu-system", "multigpu-operator")


def service_account_kubeconfig(cluster: LocalCluster, path: Path) -> Path:
    """A kubeconfig that authenticates with the operator ServiceAccount's token only."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    namespace, name = SERVICE_ACCOUNT
    token = cluster.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": "operator", "user": {"token": token.strip()}}],
                "contexts": [
                    {
                        "name": "operator",
                        "context": {"cluster": admin["clusters"][0]["name"], "user": "operator"},
                    }
                ],
                "current-context": "operator",
            }
        )
    )
    return path


def test_operator_reconciles_a_job_with_only_its_service_account_permissions(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    installed_crd.kubectl("apply", "-f", str(REPO / "manifests/operator/namespace.yaml"))
    installed_crd.kubectl("apply", "-k", str(REPO / "manifests/rbac"))
    kubeconfig = service_account_kubeconfig(installed_crd, tmp_path / "operator.kubeconfig")
    # Leader election on the base's Lease, in the operator's namespace (its Role's).
    election = {"MGJ_LEADER_ELECTION": "true", "MGJ_LEASE_NAMESPACE": SERVICE_ACCOUNT[0]}
    operator = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log", election)
    operator.start()
    try:
        job: dict[str, Any] = yaml.safe_load((REPO / "examples/ddp.yaml").read_text())
        installed_crd.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(job))
        name = job["metadata"]["name"]
        custom = client.CustomObjectsApi(api_client)

        def phase() -> str | None:
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            return (obj.get("status") or {}).get("phase")

        wait_for(lambda: phase() == "Running", "job Running under the operator's own RBAC")
        wait_event(api_client, namespace, "PodsCreated")

        # A restart (deletes pods), then the TTL (deletes the job) under the same rules.
        failing = job_manifest(
            "flaky",
            annotations={f"{SIM}/fail-after": "1s"},
            runPolicy={"backoffLimit": 1, "ttlSecondsAfterFinished": 1},
        )
        apply(installed_crd, namespace, failing)

        def gone() -> bool:
            names = [
                j["metadata"]["name"]
                for j in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)[
                    "items"
                ]
            ]
            return "flaky" not in names

        wait_for(gone, "flaky restarted, failed and deleted after its TTL", timeout=60)
        wait_event(api_client, namespace, "PodFailed")
        # A request the API server refused (403 Forbidden, or any other) is a reconcile error.
        assert reconcile_errors(operator) == 0, operator.log()
    finally:
        operator.stop()
    # ... nor a refused watch, Event or Lease: lines matched by their level, not by "403"
    # anywhere in them (a timestamp's milliseconds are 403 one line in a thousand).
    assert refusals(operator) == [], operator.log()


def test_cluster_role_grants_only_what_the_operator_uses(local_cluster: LocalCluster) -> None:
    rendered = local_cluster.kubectl("kustomize", str(REPO / "manifests/rbac")).stdout
    # The operator's (the other lets users read runtimes: aggregated into view).
    (role,) = (
        d
        for d in yaml.safe_load_all(rendered)
        if d["kind"] == "ClusterRole" and "aggregate" not in str(d["metadata"])
    )
    grants = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert not any("*" in grant for grant in grants)
    assert {r for _, r, _ in grants} == {
        "multigpujobs",
        "multigpujobs/status",
        "multigpujobs/finalizers",
        "pods",
        "services",
        "events",
        "customresourcedefinitions",
        "namespaces",
        "nodes",
        "workloads",
        "workloads/status",
        "resourceflavors",
        "workloadpriorityclasses",
        "multigpuruntimes",
        "clustermultigpuruntimes",
    }
    assert ("", "pods", "create") in grants
    assert ("multigpu.dev", "multigpujobs/status", "patch") in grants
    # Garbage collection deletes children; the operator deletes a job only after its
    # ttlSecondsAfterFinished, and never a Service.
    assert ("multigpu.dev", "multigpujobs", "delete") in grants
    assert ("", "services", "delete") not in grants
    assert ("", "secrets", "get") not in grants
    # Runtimes are only read (a job is merged with the one it names).
    runtimes = {(r, v) for _, r, v in grants if r.endswith("multigpuruntimes")}
    assert {v for _, v in runtimes} == {"list", "watch"}
    # Nodes are only read (the fit check), never changed.
    assert {(g, v) for g, r, v in grants if r == "nodes"} == {("", "list"), ("", "watch")}
    # Kueue: the operator never deletes a Workload (garbage collection does) and only
    # reads flavors and priority classes.
    kueue = {(r, v) for g, r, v in grants if g == "kueue.x-k8s.io"}
    assert ("workloads", "delete") not in kueue
    assert {v for r, v in kueue if r in ("resourceflavors", "workloadpriorityclasses")} <= {
        "get",
        "list",
        "watch",
    }

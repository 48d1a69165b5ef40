"""The Helm chart rendered with `helm template`: lint, values schema, least-privilege RBAC
equal to the kustomize base, the operator Deployment, and the optional monitoring parts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.tools import Tools, build_tools
from multigpu_operator.cli.render import render as render_job
from support.chart import ALL_ENABLED_VALUES, CHART, Manifest, find, helm, only, render

REPO = Path(__file__).resolve().parents[3]
MONITORING_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
ELECTION_ENV = {
    "MGJ_LEADER_ELECTION",
    "MGJ_LEASE_NAME",
    "MGJ_LEASE_NAMESPACE",
    "MGJ_LEASE_DURATION_SECONDS",
    "MGJ_RENEW_DEADLINE_SECONDS",
    "MGJ_RETRY_PERIOD_SECONDS",
}


@pytest.fixture(scope="module")
def tools() -> Tools:
    return build_tools("helm", only=True)


@pytest.fixture(scope="module")
def default(tools: Tools) -> list[Manifest]:
    return render(tools)


@pytest.fixture(scope="module")
def all_enabled(tools: Tools) -> list[Manifest]:
    return render(tools, "-f", str(ALL_ENABLED_VALUES))


@pytest.mark.parametrize("values", [[], ["-f", str(ALL_ENABLED_VALUES)]], ids=["default", "all"])
def test_helm_lint_is_clean(tools: Tools, values: list[str]) -> None:
    result = helm(tools, "lint", "--strict", str(CHART), *values)
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_default_values_install_the_operator_and_nothing_optional(default: list[Manifest]) -> None:
    kinds = sorted(obj["kind"] for obj in default)
    assert kinds == [
        *["ClusterMultiGPURuntime"] * 3,  # the default runtimes (test_chart_runtimes.py)
        "ClusterRole",
        "ClusterRole",  # users read runtimes
        "ClusterRoleBinding",
        "Deployment",
        "Pod",  # the `helm test` hook
        "PodDisruptionBudget",
        "Role",  # the leader election's Lease
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]


def test_all_toggles_render_every_monitoring_object(all_enabled: list[Manifest]) -> None:
    kinds = {obj["kind"] for obj in all_enabled}
    assert kinds >= MONITORING_KINDS | {"ConfigMap"}
    for kind in MONITORING_KINDS:
        assert only(all_enabled, kind)["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def rules_of(manifest: Manifest) -> list[dict[str, Any]]:
    return [
        {key: sorted(rule.get(key, [])) for key in ("apiGroups", "resources", "verbs")}
        for rule in manifest["rules"]
    ]


def operator_role(objects: list[Manifest]) -> Manifest:
    """The operator's ClusterRole (not the runtime reader's)."""
    (role,) = (r for r in find(objects, "ClusterRole") if "aggregate" not in str(r))
    return role


def test_cluster_role_equals_the_kustomize_base(default: list[Manifest]) -> None:
    base = yaml.safe_load((REPO / "manifests/rbac/cluster_role.yaml").read_text())
    assert rules_of(operator_role(default)) == rules_of(base)
    binding = only(default, "ClusterRoleBinding")
    account = only(default, "ServiceAccount")
    assert binding["roleRef"]["name"] == operator_role(default)["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]


def test_leader_election_role_grants_leases_only_in_the_release_namespace(
    default: list[Manifest],
) -> None:
    base = yaml.safe_load((REPO / "manifests/rbac/role.yaml").read_text())
    role, binding = only(default, "Role"), only(default, "RoleBinding")
    assert rules_of(role) == rules_of(base)
    assert {r["apiGroups"][0] for r in role["rules"]} == {"coordination.k8s.io"}
    assert {r["resources"][0] for r in role["rules"]} == {"leases"}
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "multigpu-system"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    account = only(default, "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]


def test_leader_election_settings_reach_the_operator(
    default: list[Manifest], all_enabled: list[Manifest]
) -> None:
    def env(objects: list[Manifest]) -> dict[str, str]:
        container = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e["value"] for e in container["env"] if e["name"] in ELECTION_ENV}

    assert env(default) == {
        "MGJ_LEADER_ELECTION": "true",
        "MGJ_LEASE_NAME": "multigpu-operator",
        "MGJ_LEASE_NAMESPACE": "multigpu-system",
        "MGJ_LEASE_DURATION_SECONDS": "10",
        "MGJ_RENEW_DEADLINE_SECONDS": "7",
        "MGJ_RETRY_PERIOD_SECONDS": "2",
    }
    assert env(all_enabled) == {
        "MGJ_LEADER_ELECTION": "true",
        "MGJ_LEASE_NAME": "ml-team-operator",
        "MGJ_LEASE_NAMESPACE": "multigpu-system",
        "MGJ_LEASE_DURATION_SECONDS": "15",
        "MGJ_RENEW_DEADLINE_SECONDS": "10",
        "MGJ_RETRY_PERIOD_SECONDS": "3",
    }
    assert only(all_enabled, "Deployment")["spec"]["replicas"] == 3
    assert only(all_enabled, "PodDisruptionBudget")["spec"]["minAvailable"] == 2


def test_a_disruption_budget_keeps_one_replica_only_when_there_are_two(
    tools: Tools, default: list[Manifest]
) -> None:
    budget = only(default, "PodDisruptionBudget")["spec"]
    template = only(default, "Deployment")["spec"]["template"]
    assert budget["minAvailable"] == 1
    assert budget["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    # One replica with minAvailable 1 would block every node drain.
    assert find(render(tools, "--set", "replicaCount=1"), "PodDisruptionBudget") == []


def test_without_leader_election_one_replica_and_no_lease_role(tools: Tools) -> None:
    objects = render(tools, "--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
    assert find(objects, "Role") == []
    container = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "MGJ_LEADER_ELECTION", "value": "false"} in container["env"]


def test_lease_timings_client_go_refuses_are_refused_at_render(tools: Tools) -> None:
    result = helm(
        tools, "template", "x", str(CHART), "--set", "leaderElection.renewDeadlineSeconds=10",
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "leaseDurationSeconds > renewDeadlineSeconds > 1.2 x retryPeriodSeconds" in (
        result.stderr
    )


def test_kustomize_deployment_runs_the_same_replicas_strategy_and_probes(
    default: list[Manifest],
) -> None:
    base = yaml.safe_load((REPO / "manifests/operator/deployment.yaml").read_text())
    chart = only(default, "Deployment")
    for spec in (base["spec"], chart["spec"]):
        (container,) = spec["template"]["spec"]["containers"]
        assert (spec["replicas"], spec["strategy"]) == (
            2,
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        )
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["MGJ_LEASE_NAME"] == "multigpu-operator"
        assert env["MGJ_LEASE_NAMESPACE"] == "multigpu-system"
    budget = yaml.safe_load((REPO / "manifests/operator/pod_disruption_budget.yaml").read_text())
    assert (
        budget["spec"]["minAvailable"]
        == only(default, "PodDisruptionBudget")["spec"]["minAvailable"]
    )
    assert budget["spec"]["selector"] == base["spec"]["selector"]


def test_operator_deployment_is_two_replicas_rolling_restricted_and_probed(
    default: list[Manifest],
) -> None:
    deployment = only(default, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["type"] == "RollingUpdate"
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == only(default, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "multigpu_operator"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]["memory"]
    env = {e["name"]: e["value"] for e in container["env"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # Liveness hits kopf's endpoint, which runs the pod-watch probe; readiness the
    # operator's /readyz beside /metrics (a healthy standby is Ready).
    assert int(env["MGJ_LIVENESS_PORT"]) == ports["healthz"]
    assert int(env["MGJ_METRICS_PORT"]) == ports["metrics"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert "MGJ_NAMESPACE" not in env


def test_metrics_service_selects_the_operator_pod(default: list[Manifest]) -> None:
    service = only(default, "Service")
    template = only(default, "Deployment")["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_non_default_values_reach_the_deployment(all_enabled: list[Manifest]) -> None:
    pod = only(all_enabled, "Deployment")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["MGJ_NAMESPACE"] == "ml-team"
    assert (env["MGJ_WORKERS"], env["MGJ_WATCH_STALE_SECONDS"]) == ("8", "300")
    assert env["MGJ_API_CONNECTIONS"] == "4"
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert pod["tolerations"][0]["key"] == "dedicated"


def test_service_monitor_scrapes_the_metrics_service_keeping_job_labels(
    all_enabled: list[Manifest],
) -> None:
    monitor = only(all_enabled, "ServiceMonitor")["spec"]
    service = only(all_enabled, "Service")
    assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    # mgj_job_pod_info{namespace,pod} must keep the training pod's labels for the DCGM join.
    assert endpoint["honorLabels"] is True


def test_pod_monitor_selects_operator_made_pods_by_metrics_port_name(
    all_enabled: list[Manifest],
) -> None:
    monitor = only(all_enabled, "PodMonitor")["spec"]
    assert monitor["selector"]["matchLabels"] == {
        "app.kubernetes.io/managed-by": "multigpu-operator"
    }
    assert monitor["namespaceSelector"] == {"matchNames": ["ml-team", "research"]}
    assert monitor["jobLabel"] == "multigpu.dev/job-name"
    (endpoint,) = monitor["podMetricsEndpoints"]
    assert endpoint["honorLabels"] is True
    keep = endpoint["relabelings"][0]
    assert keep["action"] == "keep"
    assert keep["regex"] == "mgj-metrics(-[0-9]+)?"


def test_dashboard_config_map_carries_the_dashboard_file(all_enabled: list[Manifest]) -> None:
    config_map = only(all_enabled, "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Training"}
    shipped = json.loads((CHART / "dashboards/multigpu-jobs.json").read_text())
    assert json.loads(config_map["data"]["multigpu-jobs.json"]) == shipped


def test_helm_test_hook_reads_the_metrics_service(default: list[Manifest]) -> None:
    pod = only(default, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    service = only(default, "Service")
    name, port = service["metadata"]["name"], service["spec"]["ports"][0]["port"]
    script = pod["spec"]["containers"][0]["command"][-1]
    assert f"http://{name}.multigpu-system.svc:{port}/metrics" in script


def test_zero_replicas_installs_everything_but_the_operator_pod(tools: Tools) -> None:
    objects = render(tools, "--set", "replicaCount=0")
    assert only(objects, "Deployment")["spec"]["replicas"] == 0
    assert find(objects, "ClusterRole")


@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ("replicaCount=2,leaderElection.enabled=false", "/replicaCount"),
        ("leaderElection.leaseDurationSeconds=-1", "/leaderElection/leaseDurationSeconds"),
        ("podDisruptionBudget.minAvailable=half", "/podDisruptionBudget/minAvailable"),
        ("replicaCount=one", "/replicaCount"),
        ("serviceMonitor.interval=thirty", "/serviceMonitor/interval"),
        ("serviceMonitr.enabled=true", "serviceMonitr"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
    ],
)
def test_values_schema_rejects_mistakes(tools: Tools, setting: str, complaint: str) -> None:
    result = helm(tools, "template", "x", str(CHART), "--set", setting, check=False)
    assert result.returncode != 0
    assert complaint in result.stderr


def test_pod_monitor_scrapes_each_process_port_the_docs_tell_users_to_declare(
    all_enabled: list[Manifest],
) -> None:
    # The template of docs/monitoring.md: one named port per torchrun process.
    doc = (REPO / "docs/monitoring.md").read_text()
    snippet = doc[doc.index("spec:\n  gpusPerReplica: 2") :].split("```")[0]
    spec: dict[str, Any] = yaml.safe_load(snippet)["spec"]
    spec["template"]["spec"]["containers"][0]["image"] = "trainer:1"
    job = {
        "apiVersion": "multigpu.dev/v1alpha1",
        "kind": "MultiGPUJob",
        "metadata": {"name": "ddp"},
        "spec": {"mode": "DistributedDataParallel", **spec},
    }
    objects, errors = render_job(iter([job]), "ml")
    assert errors == []
    pods = [obj for obj in objects if obj["kind"] == "Pod"]
    ports = list(pods[0]["spec"]["containers"][0]["ports"])
    regex = only(all_enabled, "PodMonitor")["spec"]["podMetricsEndpoints"][0]["relabelings"][0]
    # Prometheus anchors relabel regexes: the whole name must match.
    assert all(re.fullmatch(regex["regex"], port["name"]) for port in ports)
    assert len(ports) == spec["gpusPerReplica"]
    env = {e["name"]: e.get("value") for e in pods[0]["spec"]["containers"][0]["env"]}
    assert [p["containerPort"] for p in ports] == [
        int(env["MGJ_TRAINER_METRICS_PORT"]) + i for i in range(2)
    ]

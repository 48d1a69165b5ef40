"""A real Prometheus, run by the Prometheus Operator (tests/cluster/prometheus.py), reads the
chart's ServiceMonitor, PodMonitor and PrometheusRule: it scrapes the operator's pod and a
real job's trainer pods on the real node, every query of the Grafana dashboard returns data
for that job (the GPU panels aside: DCGM needs NVIDIA GPUs), and each alert fires when its
condition is caused and resolves after.

One Prometheus serves the whole module, scraping and evaluating every 2 s; the chart's alert
windows are values, set to seconds here. The chart is installed before the Prometheus starts
so its first configuration already holds the chart's monitors and rules (a change later would
reach the pod only when the kubelet refreshes the mounted Secret, up to a minute).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.localcluster import LocalCluster
from cluster.prometheus import Monitoring, api
from support.chart import helm
from support.jobs import SIM, job_manifest
from support.promql import DASHBOARD, dashboard_expressions
from support.real_pods import install_operator, on_real_node
from support.waiting import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.uses_tools("prometheus", "prometheus-operator")]

REPO = Path(__file__).resolve().parents[2]
RELEASE = "monitored"
OPERATOR_SERVICE = f"{RELEASE}-multigpu-operator-metrics"
VALUES = {
    "serviceMonitor.enabled": "true",
    "serviceMonitor.interval": "2s",
    "serviceMonitor.scrapeTimeout": "2s",
    "podMonitor.enabled": "true",
    "podMonitor.interval": "2s",
    "podMonitor.scrapeTimeout": "2s",
    "prometheusRule.enabled": "true",
    "prometheusRule.failedJobWindow": "20s",
    "prometheusRule.restartThreshold": "1",
    "prometheusRule.restartWindow": "20s",
    "prometheusRule.pendingFor": "10s",
    "prometheusRule.operatorDownFor": "6s",
    "prometheusRule.noLeaderFor": "6s",
    "prometheusRule.reconcileErrorsFor": "6s",
    "prometheusRule.reconcileErrorsWindow": "30s",
}


@dataclass
class Monitored:
    cluster: LocalCluster
    namespace: str
    url: str  # Prometheus's

    def alerts(self, name: str, state: str | None = None) -> list[dict[str, Any]]:
        """Active alerts `name` (state: pending or firing); the test's release is the only
        one with rules."""
        return [
            a
            for a in api(self.url, "alerts")["alerts"]
            if a["labels"]["alertname"] == name and (state is None or a["state"] == state)
        ]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = api(self.url, "query", query=expr)["result"]
        return result

    def apply(self, manifest: dict[str, Any]) -> None:
        body = json.dumps(manifest)
        self.cluster.kubectl("apply", "-n", self.namespace, "-f", "-", stdin=body)

    def fire_then_resolve(self, *names: str, cause_ended: Any = None, timeout: float = 90) -> None:
        """Wait until every alert of `names` has fired (each may resolve before the others
        fire), end the cause, and wait until none is active."""
        fired: set[str] = set()

        def all_fired() -> bool:
            for name in set(names) - fired:
                firing = self.alerts(name, "firing")
                assert all(a["labels"].get("severity") for a in firing), firing
                if firing:
                    fired.add(name)
            return fired == set(names)

        wait_for(all_fired, f"{names} firing", timeout, 1)
        if cause_ended is not None:
            cause_ended()
        wait_for(lambda: not any(self.alerts(n) for n in names), f"{names} resolved", timeout, 1)


@pytest.fixture(scope="module")
def monitored(installed_crd: LocalCluster) -> Iterator[Monitored]:
    monitoring = Monitoring(installed_crd)
    monitoring.install_crds()  # the chart's monitors and rules need them
    namespace = f"monitored-{uuid.uuid4().hex[:6]}"
    installed_crd.kubectl("create", "namespace", namespace)
    values = [arg for k, v in VALUES.items() for arg in ("--set", f"{k}={v}")]
    install_operator(
        installed_crd, RELEASE, namespace, "--set", f"watchNamespace={namespace}", *values
    )
    try:
        try:
            url = monitoring.up()
        except Exception:
            print(f"--- Prometheus Operator log ---\n{monitoring.log()}")
            raise
        yield Monitored(installed_crd, namespace, url)
    finally:
        kubeconfig = ("--kubeconfig", str(installed_crd.kubeconfig))
        helm(installed_crd.tools, "uninstall", RELEASE, "-n", namespace, *kubeconfig, check=False)
        installed_crd.kubectl("delete", "namespace", namespace, "--wait=false")
        monitoring.down()


def trainer_job(name: str) -> dict[str, Any]:
    """examples/cpu-ddp.yaml (it declares the port the PodMonitor looks for) on the real
    node, training long enough to be scraped."""
    job: dict[str, Any] = yaml.safe_load((REPO / "examples/cpu-ddp.yaml").read_text())
    job["metadata"]["name"] = name
    container = job["spec"]["template"]["spec"]["containers"][0]
    # Checkpoints (for the dashboard's "since the last checkpoint") in the container's /tmp.
    container["args"] = [
        "--epochs", "1000", "--checkpoint-dir", "/tmp/ckpt", "--checkpoint-every-steps", "5",
    ]  # fmt: skip
    return on_real_node(job)


def targets(monitored: Monitored) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api(monitored.url, "targets", state="active")["activeTargets"]
    return found


def dashboard_queries(namespace: str, job: str) -> dict[str, str]:
    """The dashboard's queries with its namespace and job variables set, the GPU ones left
    out (DCGM's metrics exist only where NVIDIA GPUs and DCGM's exporter are)."""
    text = DASHBOARD.read_text().replace("$namespace", namespace).replace("$job", job)
    found = dashboard_expressions(json.loads(text))
    return {where: expr for where, expr in found.items() if "DCGM_FI_" not in expr}


def has_data(monitored: Monitored, expr: str) -> bool:
    """A non-empty answer with at least one number (a quantile of no observations is NaN)."""
    return any(r["value"][1] != "NaN" for r in monitored.query(expr))


def test_the_operator_and_every_trainer_pod_are_scraped_and_fill_the_dashboard(
    monitored: Monitored,
) -> None:
    ns = monitored.namespace
    # Jobs that succeed and fail (kwok runs their pods), for the dashboard's counters; their
    # queue times scraped before the real job's, so that rate() over them sees one more.
    monitored.apply(job_manifest("done", replicas=1, annotations={f"{SIM}/succeed-after": "1s"}))
    fail = {f"{SIM}/fail-after": "1s"}
    monitored.apply(
        job_manifest("broken", replicas=1, annotations=fail, runPolicy={"backoffLimit": 0})
    )
    queued = f'mgj_job_time_to_running_seconds_count{{namespace="{ns}"}}'
    wait_for(lambda: monitored.query(queued), "the first queue times scraped", 60, 1)
    monitored.apply(trainer_job("scraped"))

    def up_targets() -> dict[str, dict[str, Any]]:
        up = {t["labels"].get("pod", ""): t for t in targets(monitored) if t["health"] == "up"}
        trainers = [p for p in up if p.startswith("scraped-")]
        operator = [t for t in up.values() if t["labels"].get("job") == OPERATOR_SERVICE]
        return up if len(trainers) == 2 and operator else {}

    up = wait_for(up_targets, "the operator and both trainer pods scraped", 240, 2)
    assert up["scraped-0"]["labels"]["job"] == "scraped"  # PodMonitor jobLabel: the job's name
    operator = next(t for t in up.values() if t["labels"].get("job") == OPERATOR_SERVICE)
    assert operator["labels"]["namespace"] == ns

    # The operator's series keep the JOB's labels (honorLabels), the trainers' carry both ranks.
    info = wait_for(
        lambda: monitored.query(f'mgj_job_info{{namespace="{ns}",job="scraped"}}'), "info"
    )
    assert info[0]["metric"]["mode"] == "DistributedDataParallel"
    trained = f'mgj_trainer_samples_total{{namespace="{ns}",job="scraped"}} > 0'

    def ranks() -> set[str]:
        return {s["metric"]["rank"] for s in monitored.query(trained)}

    wait_for(lambda: ranks() == {"0", "1"}, "samples trained by both ranks", 120, 2)

    # The dashboard's "time running" samples each minute: data within about a minute.
    for where, expr in dashboard_queries(ns, "scraped").items():
        wait_for(partial(has_data, monitored, expr), f"data for {where}: {expr}", 90, 2)
    monitored.cluster.kubectl(
        "delete", "mgj", "-n", ns, "scraped", "done", "broken", "--wait=false"
    )


def test_a_failed_job_fires_failed_and_restarting_alerts_which_resolve(
    monitored: Monitored,
) -> None:
    # Caused here, not left over from a failure of an earlier test.
    wait_for(lambda: not monitored.alerts("MultiGPUJobFailed"), "no job failed lately", 60, 1)
    # A kwok-run pod that fails after 5 s: one restart (scraped at 0 first), then Failed.
    monitored.apply(
        job_manifest(
            "flaky",
            replicas=1,
            annotations={f"{SIM}/fail-after": "5s"},
            runPolicy={"backoffLimit": 1},
        )
    )
    monitored.fire_then_resolve("MultiGPUJobRestartingTooOften", "MultiGPUJobFailed")
    failed = monitored.query(f'mgj_jobs_failed_total{{namespace="{monitored.namespace}"}}')
    assert failed, "mgj_jobs_failed_total not scraped"
    assert float(failed[0]["value"][1]) >= 1


def test_jobs_pending_too_long_fire_and_resolve_when_they_go(monitored: Monitored) -> None:
    stuck = job_manifest("stuck", replicas=1)
    # No node has this label: the pod stays unschedulable and the job Pending.
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"multigpu.dev/no-such-node": "x"}
    monitored.apply(stuck)
    delete = ("delete", "mgj", "-n", monitored.namespace, "stuck", "--wait=false")
    monitored.fire_then_resolve(
        "MultiGPUJobsPendingTooLong", cause_ended=lambda: monitored.cluster.kubectl(*delete)
    )


def test_the_operator_down_fires_and_resolves_when_it_is_back(monitored: Monitored) -> None:
    deployment = ("deployment", f"{RELEASE}-multigpu-operator", "-n", monitored.namespace)

    def scale(replicas: int) -> None:
        monitored.cluster.kubectl("scale", *deployment, f"--replicas={replicas}")

    scale(0)
    try:
        monitored.fire_then_resolve(
            "MultiGPUOperatorDown", cause_ended=lambda: scale(1), timeout=120
        )
    finally:
        scale(1)


def test_no_leader_fires_and_resolves_when_a_replica_leads_again(monitored: Monitored) -> None:
    kubectl = monitored.cluster.kubectl
    lease = ("lease", f"{RELEASE}-multigpu-operator", "-n", monitored.namespace)  # the default
    wait_for(lambda: kubectl("get", *lease, check=False).returncode == 0, "the leader's Lease")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # Another holder takes the Lease for an hour: the leader sees it lost at its next renewal
    # (and exits, to come back as a standby); no replica leads while the operator is scraped.
    taken = {"holderIdentity": "elsewhere", "leaseDurationSeconds": 3600, "renewTime": now}
    kubectl("patch", *lease, "--type=merge", "-p", json.dumps({"spec": taken}))
    # Deleted, the Lease is free: the standby creates it again and leads.
    monitored.fire_then_resolve(
        "MultiGPUOperatorNoLeader",
        cause_ended=lambda: kubectl("delete", *lease),
        timeout=120,
    )
    led = monitored.query(f'sum(mgj_leader{{namespace="{monitored.namespace}"}})')
    assert led, "mgj_leader not scraped"
    assert float(led[0]["value"][1]) == 1, led


def test_reconcile_errors_fire_and_resolve_when_the_permission_is_back(
    monitored: Monitored,
) -> None:
    kubectl = monitored.cluster.kubectl
    name = "errors"
    wait_for(
        lambda: not monitored.alerts("MultiGPUOperatorReconcileErrors"),
        "no reconcile errors lately",
        60,
        1,
    )
    # The chart's ClusterRole without `create pods`: each pass of a new job is refused
    # (Forbidden), an error the operator logs, counts and retries.
    role = ("clusterrole", f"{RELEASE}-multigpu-operator")
    rules = json.loads(kubectl("get", *role, "-o", "json").stdout)["rules"]
    index = next(i for i, rule in enumerate(rules) if rule["resources"] == ["pods"])
    verbs = rules[index]["verbs"]
    assert "create" in verbs, rules[index]

    def set_verbs(value: list[str]) -> None:
        patch = [{"op": "replace", "path": f"/rules/{index}/verbs", "value": value}]
        kubectl("patch", *role, "--type=json", "-p", json.dumps(patch))

    set_verbs([verb for verb in verbs if verb != "create"])
    try:
        monitored.apply(job_manifest(name, replicas=1))
        monitored.fire_then_resolve(
            "MultiGPUOperatorReconcileErrors", cause_ended=lambda: set_verbs(verbs), timeout=120
        )
    finally:
        set_verbs(verbs)
    errors = monitored.query(
        f'sum(mgj_reconcile_errors_total{{namespace="{monitored.namespace}"}})'
    )
    assert errors, "mgj_reconcile_errors_total not scraped"
    assert float(errors[0]["value"][1]) >= 1, errors
    # With the permission back, the retried job starts.
    phase = ("get", "mgj", "-n", monitored.namespace, name, "-o", "jsonpath={.status.phase}")
    try:
        wait_for(lambda: kubectl(*phase).stdout == "Running", f"{name} Running", 120, 1)
    except AssertionError:
        ns = monitored.namespace
        print(kubectl("get", "mgj,pods,events", "-n", ns, "-o", "wide", check=False).stdout)
        print(kubectl("get", "mgj", name, "-n", ns, "-o", "yaml", check=False).stdout)
        deployment = f"deploy/{RELEASE}-multigpu-operator"
        print(kubectl("logs", "-n", ns, deployment, "--tail=60", check=False).stdout)
        raise
    kubectl("delete", "mgj", "-n", monitored.namespace, name, "--wait=false")

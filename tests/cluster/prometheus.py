"""A real Prometheus on a local cluster, run by the Prometheus Operator, reading the chart's
ServiceMonitor, PodMonitor and PrometheusRule as a user's would.

- The Prometheus Operator runs as a host process beside the control plane, like Kueue
  (tests/cluster/kueue.py): it only talks to the API server, so out of the cluster it needs
  no image, no RBAC of its own and none of the real node's CPU, which its pods share with
  the operator under test and the trainers.
- Prometheus and its config reloader run in the pod the operator makes for a `Prometheus`,
  on the real node, so they discover and scrape targets exactly as in any cluster (the pod's
  service account, pod IPs). Their images hold only the static binaries build-tools.sh
  compiled (FROM scratch, as the pause image) and are pulled from the local registry
  like ours.
- This machine routes to the real node's pod network: Prometheus's API is read at its pod IP.

    python tests/cluster/prometheus.py up --cluster mgj
    python tests/cluster/prometheus.py down --cluster mgj
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster import hostproc
from cluster.localcluster import LocalCluster
from cluster.realnode_config import NODE_KIND, NODE_KIND_LABEL, NODE_TAINT, REGISTRY_HOST
from cluster.tools import Tools, build_tools, module_dir

NAMESPACE = "mgj-monitoring"
NAME = "mgj"
ENV_MARKER = "MGJ_PROMETHEUS_OPERATOR"
IMAGES = f"{REGISTRY_HOST}/multigpu-operator"  # built here, pushed to the local registry
MODULE = "github.com/prometheus-operator/prometheus-operator"


class Monitoring:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.dir = cluster.kubeconfig.parent / "prometheus"

    @property
    def marker(self) -> str:
        return str(self.dir)

    def running(self) -> list[int]:
        return hostproc.marked_processes(ENV_MARKER, self.marker)

    def up(self, interval: str = "2s", timeout: float = 240) -> str:
        """Start the Prometheus Operator (or keep the one running) and a Prometheus that
        selects every ServiceMonitor, PodMonitor and PrometheusRule of the cluster, scraping
        and evaluating every `interval`; its API's URL once it is Ready."""
        tools = self.install_crds()
        prometheus, reloader = _images(tools)
        from cluster.images import push

        for image in (prometheus, reloader):
            push(self.cluster.registry, image)  # the node pulls them, as every image
        if not self.running():
            port = hostproc.free_port()
            argv = [
                str(tools.prometheus_operator_bin / "operator"),
                f"--web.listen-address=127.0.0.1:{port}",
                f"--prometheus-config-reloader={reloader}",
                "--log-level=info",
            ]
            env = {
                **os.environ,
                "KUBECONFIG": str(self.cluster.kubeconfig),
                ENV_MARKER: self.marker,
            }
            hostproc.start_daemon("prometheus-operator", argv, self.dir, env)
        body = {"apiVersion": "v1", "kind": "List", "items": _objects(tools, prometheus, interval)}
        self.cluster.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(body))
        deadline = time.monotonic() + timeout
        while not (url := self._ready_url()):
            if not self.running():
                raise RuntimeError(f"the Prometheus Operator exited; see {self.dir}")
            if time.monotonic() > deadline:
                seen = self.cluster.kubectl("get", "pods,events", "-n", NAMESPACE, check=False)
                raise TimeoutError(f"Prometheus not ready after {timeout:.0f}s:\n{seen.stdout}")
            time.sleep(1)
        return url

    def install_crds(self) -> Tools:
        """Every CRD of the Prometheus Operator (it watches them all), from its module; the
        built tools."""
        # Built on first use (build_tools's LATE_TOOLS), or waited for when a test session's
        # background build has them in hand; the build downloads the module.
        tools = build_tools("prometheus", "prometheus-operator")
        self.cluster.install_crds(
            module_dir("prometheus-operator", MODULE) / "example/prometheus-operator-crd"
        )
        return tools

    def down(self) -> None:
        """Remove the Prometheus (the garbage collector removes its StatefulSet and pod) and
        stop the operator. The namespace stays, so an `up` right after need not wait for it."""
        self.cluster.kubectl(
            "delete", "prometheus", NAME, "-n", NAMESPACE, "--ignore-not-found", "--wait=false",
            check=False,
        )  # fmt: skip
        hostproc.stop(self.running())

    def log(self) -> str:
        path = self.dir / "prometheus-operator.log"
        return path.read_text(errors="replace")[-20000:] if path.exists() else ""

    def _ready_url(self) -> str | None:
        pod = self.cluster.kubectl(
            "get", "pod", "-n", NAMESPACE, f"prometheus-{NAME}-0", "-o", "json", check=False
        )
        if pod.returncode != 0:
            return None
        status = json.loads(pod.stdout).get("status", {})
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
        )
        return f"http://{status['podIP']}:9090" if ready and status.get("podIP") else None


def api(url: str, path: str, **params: str) -> Any:
    """The `data` of a Prometheus HTTP API answer (GET url/api/v1/path?params)."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url}/api/v1/{path}{query}", timeout=10) as resp:
        answer = json.loads(resp.read())
    if answer.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {answer}")
    return answer["data"]


def _images(tools: Tools) -> tuple[str, str]:
    """Images of Prometheus and of the config reloader, made (once per version) from the
    binaries build-tools.sh compiled; the operator runs each binary as /bin/<name>."""
    prometheus = f"{IMAGES}/prometheus:{tools.prometheus_version}"
    reloader = f"{IMAGES}/prometheus-config-reloader:{tools.prometheus_operator_version}"
    _scratch_image(prometheus, tools.prometheus_bin / "prometheus")
    _scratch_image(reloader, tools.prometheus_operator_bin / "prometheus-config-reloader")
    return prometheus, reloader


def _scratch_image(name: str, binary: Path) -> None:
    from cluster.images import buildah, image_id

    if image_id(name):
        return
    container = buildah("from", "scratch").stdout.strip()
    try:
        buildah("copy", container, str(binary), f"/bin/{binary.name}")
        entrypoint = json.dumps([f"/bin/{binary.name}"])
        buildah("config", "--entrypoint", entrypoint, "--user", "65534:65534", container)
        buildah("commit", "--quiet", container, name)
    finally:
        buildah("rm", container, check=False)


def _objects(tools: Tools, image: str, interval: str) -> list[dict[str, Any]]:
    """The namespace, Prometheus's service account and what it may read (what service
    discovery lists and watches), and the Prometheus itself."""
    meta = {"name": "prometheus", "namespace": NAMESPACE}
    discovery = [
        {"apiGroups": [""], "resources": ["pods", "services", "endpoints"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
         "verbs": ["get", "list", "watch"]},
    ]  # fmt: skip
    everything: dict[str, Any] = {}  # an empty selector: every monitor, rule and namespace
    toleration = {**NODE_TAINT, "operator": "Equal"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "mgj-prometheus"},
            "rules": discovery,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "mgj-prometheus"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "mgj-prometheus",
            },
            "subjects": [{"kind": "ServiceAccount", **meta}],
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "Prometheus",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "image": image,
                "version": tools.prometheus_version,
                # From the local registry; a rebuilt image has a new version tag.
                "imagePullPolicy": "IfNotPresent",
                "serviceAccountName": "prometheus",
                "replicas": 1,
                "scrapeInterval": interval,
                "evaluationInterval": interval,
                "serviceMonitorSelector": everything,
                "serviceMonitorNamespaceSelector": everything,
                "podMonitorSelector": everything,
                "podMonitorNamespaceSelector": everything,
                "ruleSelector": everything,
                "ruleNamespaceSelector": everything,
                "nodeSelector": {NODE_KIND_LABEL: NODE_KIND},
                "tolerations": [toleration],
                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
                "securityContext": {"runAsUser": 65534, "runAsNonRoot": True, "fsGroup": 65534},
            },
        },
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("--cluster", required=True)
    args = parser.parse_args(argv)
    monitoring = Monitoring(LocalCluster(build_tools(), args.cluster))
    if args.command == "up":
        print(monitoring.up(interval="15s"))
    else:
        monitoring.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())

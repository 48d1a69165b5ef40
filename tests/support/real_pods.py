"""Jobs and the operator on the local cluster's real node (tests/cluster/realnode.py):
what `make demo` and the real-pod tests share."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

from cluster.localcluster import LocalCluster
from cluster.realnode_config import NODE_KIND, NODE_KIND_LABEL, NODE_TAINT
from support.chart import CHART

REAL_NODE_VALUES = CHART.parents[1] / "tests/cluster/real-node-values.yaml"
TOLERATION = {
    "key": NODE_TAINT["key"],
    "operator": "Equal",
    "value": NODE_TAINT["value"],
    "effect": NODE_TAINT["effect"],
}
# What Pod Security "restricted" asks of a container (the trainer image runs as 10001).
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def install_operator(
    cluster: LocalCluster, release: str, namespace: str, *values: str
) -> subprocess.CompletedProcess[str]:
    """`helm upgrade --install` of the chart, the operator running on the real node from the
    image `make images` loaded there; waits until its pod is Ready."""
    return subprocess.run(
        [
            str(cluster.tools.helm), "--kubeconfig", str(cluster.kubeconfig),
            "upgrade", "--install", release, str(CHART), "--namespace", namespace,
            "--create-namespace", "-f", str(REAL_NODE_VALUES), *values,
            "--wait", "--timeout", "180s",
        ],
        capture_output=True, text=True, check=True,
    )  # fmt: skip


def on_real_node(job: dict[str, Any], cpu: str = "100m", memory: str = "1Gi") -> dict[str, Any]:
    """`job` with its pods placed on the real node, small CPU requests (the machine has two
    cores for everything) and the security context a restricted namespace demands."""
    job = copy.deepcopy(job)
    pod = job["spec"]["template"].setdefault("spec", {})
    pod["nodeSelector"] = {**pod.get("nodeSelector", {}), NODE_KIND_LABEL: NODE_KIND}
    pod["tolerations"] = [*pod.get("tolerations", []), TOLERATION]
    for container in pod["containers"]:
        container["securityContext"] = {
            **RESTRICTED_CONTAINER,
            **container.get("securityContext", {}),
        }
        resources = container.setdefault("resources", {})
        resources["requests"] = {"cpu": cpu, "memory": memory}
    return job


def pod_log(cluster: LocalCluster, namespace: str, pod: str) -> str:
    """The pod's log as `kubectl logs` shows it (the kubelet serves it)."""
    return cluster.kubectl("logs", "-n", namespace, pod, check=False).stdout


def bind_local_volume(
    cluster: LocalCluster, namespace: str, claim: dict[str, Any], directory: Path
) -> str:
    """`claim` created in `namespace`, bound to a local PersistentVolume in `directory` on
    the real node (the local cluster has no storage provisioner); the volume's name."""
    name = f"{namespace}-{claim['metadata']['name']}"[:63]
    on_node = {"key": NODE_KIND_LABEL, "operator": "In", "values": [NODE_KIND]}
    volume: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": claim["spec"]["resources"]["requests"],
            "accessModes": claim["spec"]["accessModes"],
            "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": str(directory)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [on_node]}]}},
            "claimRef": {"namespace": namespace, "name": claim["metadata"]["name"]},
        },
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(volume))
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(claim))
    return name

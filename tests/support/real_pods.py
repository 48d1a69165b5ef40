"""Jobs and the operator on the local cluster's real node (tests/cluster/realnode.py):
what `make demo` and the real-pod tests share."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

from cluster.images import OPERATOR_IMAGE, TRAINER_IMAGE
from cluster.localcluster import LocalCluster
from cluster.progress import say
from cluster.realnode_config import NODE_KIND, NODE_KIND_LABEL, NODE_TAINT
from cluster.registry import chart_ref, local_name, push_chart
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
    cluster: LocalCluster,
    release: str,
    namespace: str,
    *values: str,
    version: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The repository's chart pushed to the local registry as `version` (Chart.yaml's by
    default), then installed from there as users do, `helm install oci://...` (`helm
    upgrade` when the release exists); the operator runs on the real node from the image
    `make images` pushed. Waits until its pod is Ready."""
    helm = [str(cluster.tools.helm), "--kubeconfig", str(cluster.kubeconfig)]
    exists = subprocess.run(
        [*helm, "status", release, "--namespace", namespace], capture_output=True, check=False
    )
    verb = "upgrade" if exists.returncode == 0 else "install"
    version = push_chart(cluster.tools.helm, version)
    say(f"helm {verb} {release} {chart_ref()} --version {version} --plain-http -n {namespace}")
    done = subprocess.run(
        [
            *helm, verb, release, chart_ref(), "--version", version, "--plain-http",
            "--namespace", namespace, "--create-namespace", "-f", str(REAL_NODE_VALUES), *values,
            "--wait", "--timeout", "180s",
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"helm {verb} {release} failed: {done.stderr.strip()}")
    return done


def unpushed_images(cluster: LocalCluster) -> list[str]:
    """The project's images that the local registry lacks (`make images` pushes them)."""
    refs = [local_name(image) for image in (TRAINER_IMAGE, OPERATOR_IMAGE)]
    return [ref for ref in refs if cluster.registry.digest(ref) is None]


def on_real_node(job: dict[str, Any], cpu: str = "100m", memory: str = "1Gi") -> dict[str, Any]:
    """`job` with its pods placed on the real node, its images from the local registry
    (pulled Always: an unchanged image costs a look at its digest, a rebuilt one is never
    stale), small CPU requests (the machine has two cores for everything) and the security
    context a restricted namespace demands."""
    job = copy.deepcopy(job)
    pod = job["spec"]["template"].setdefault("spec", {})
    pod["nodeSelector"] = {**pod.get("nodeSelector", {}), NODE_KIND_LABEL: NODE_KIND}
    pod["tolerations"] = [*pod.get("tolerations", []), TOLERATION]
    for container in pod["containers"]:
        container["image"] = local_name(container["image"])
        container["imagePullPolicy"] = "Always"
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

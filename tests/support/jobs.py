"""Reading and writing MultiGPUJobs and their pods on the test cluster."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION

SIM = "sim.multigpu.dev"


def job_manifest(
    name: str,
    mode: str = "DistributedDataParallel",
    replicas: int = 2,
    gpus: int = 1,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A job whose pods kwok runs; `annotations` (sim.multigpu.dev/...) script them."""
    template: dict[str, Any] = {
        "spec": {"containers": [{"name": "trainer", "image": "trainer:test"}]}
    }
    if annotations:
        template["metadata"] = {"annotations": annotations}
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MultiGPUJob",
        "metadata": metadata,
        "spec": {
            "mode": mode,
            "replicas": replicas,
            "gpusPerReplica": gpus,
            "template": template,
            **spec,
        },
    }


def apply(cluster: LocalCluster, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest))


def read_job(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return obj


def job_status(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return read_job(api, namespace, name).get("status") or {}


def job_phase(api: client.ApiClient, namespace: str, name: str) -> str | None:
    return job_status(api, namespace, name).get("phase")


def condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == ctype), {})


def patch_spec(api: client.ApiClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
    )


def job_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"multigpu.dev/job-name={name}")
    return sorted(pods.items, key=lambda p: p.metadata.name)


def live_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    return [p for p in job_pods(core, namespace, name) if not p.metadata.deletion_timestamp]


def annotate_pod(core: client.CoreV1Api, namespace: str, pod: str, values: dict[str, str]) -> None:
    core.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": values}})

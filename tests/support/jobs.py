"""Reading and writing MultiGPUJobs and their pods on the test cluster."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.waiting import wait_for

SIM = "sim.multigpu.dev"
# A simulated pod that runs past any test's end: the job stays Running while it checks.
RUN_LONG = {f"{SIM}/succeed-after": "600s"}


def job_manifest(
    name: str,
    mode: str = "DistributedDataParallel",
    replicas: int = 2,
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A job whose pods kwok runs; `annotations` (sim.multigpu.dev/...) script them.

    CPU-only by default: tests share the cluster's 32 simulated GPUs, and only those
    about GPUs should wait for them."""
    template: dict[str, Any] = {
        "spec": {"containers": [{"name": "trainer", "image": "trainer:test"}]}
    }
    if annotations:
        template["metadata"] = {"annotations": dict(annotations)}  # a copy: callers share constants
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


@dataclass
class JobEnv:
    """One test's namespace on the cluster, with what lifecycle tests do to jobs in it."""

    cluster: LocalCluster
    api: client.ApiClient
    core: client.CoreV1Api
    namespace: str

    def apply(self, manifest: dict[str, Any]) -> None:
        apply(self.cluster, self.namespace, manifest)

    def status(self, name: str) -> dict[str, Any]:
        return job_status(self.api, self.namespace, name)

    def wait_phase(self, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        """The job's status once it reaches `phase`."""

        def probe() -> dict[str, Any] | None:
            status = self.status(name)
            return status if status.get("phase") == phase else None

        return wait_for(probe, f"{name} {phase}", timeout=timeout)

    def pods(self, name: str) -> list[Any]:
        """The job's pods that are not being deleted."""
        return live_pods(self.core, self.namespace, name)

    def running(self, name: str, n: int) -> list[Any]:
        """The job's pods if exactly `n` exist and all run, else []."""
        pods = self.pods(name)
        return pods if len(pods) == n and all(p.status.phase == "Running" for p in pods) else []

    def annotate(self, pod: str, values: dict[str, str]) -> None:
        annotate_pod(self.core, self.namespace, pod, values)

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        patch_spec(self.api, self.namespace, name, spec)

    def scale(self, name: str, replicas: int) -> None:
        self.cluster.kubectl("scale", "-n", self.namespace, f"mgj/{name}", f"--replicas={replicas}")

"""The objects the benchmarks send: the operator's MultiGPUJob, the bare client's pods and
Service, and a client that sends a job's own objects straight, without the operator.

`DirectClient` with every part is what the API server allows for exactly the objects
the operator makes for a normal start (the job, its Service, its planned pods, two
status writes and two Events): bench_create.py's `--direct` times it beside the
operator, and bench_plane.py prices each part on its own.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from multigpu_operator.api.spec import GROUP, PLURAL, VERSION, DnsNames
from multigpu_operator.cluster.events import event_body
from multigpu_operator.reconcile import plan_object

BARE_LABEL = "bench/job"
MEASURED = "bench/measured"
# kwok runs the pods until this passes (tests/cluster/stages.yaml): none finishes mid-run.
RUN_LONG = {"sim.multigpu.dev/succeed-after": "3600s"}
# Every part: the operator's objects for a normal start (DirectClient).
NORMAL_START = frozenset({"job", "service", "pods", "status"})


def job_manifest(
    name: str, pods: int, suspend: bool = False, dns_names: str = DnsNames.EVERY_REPLICA
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MultiGPUJob",
        # Measured jobs carry a label: the delete/create cycles delete them by it.
        "metadata": {"name": name, "labels": {} if suspend else {MEASURED: "1"}},
        "spec": {
            "mode": "DistributedDataParallel",
            "replicas": pods,
            "gpusPerReplica": 1,
            "suspend": suspend,
            "dnsNames": dns_names,
            "template": {
                "metadata": {"annotations": RUN_LONG},
                "spec": {"containers": [{"name": "trainer", "image": "trainer:bench"}]},
            },
        },
    }


def bare_pod(name: str, job: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {BARE_LABEL: job}, "annotations": RUN_LONG},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "trainer:bench",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "restartPolicy": "Never",
        },
    }


def bare_service(job: str) -> dict[str, Any]:
    """The operator's headless Service (plan/service.py), selecting the bare pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": job},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {BARE_LABEL: job},
            "ports": [{"name": "master", "port": 29500}],
        },
    }


class DirectClient:
    """Sends one job's objects itself, the `parts` of NORMAL_START asked for ("pods"
    alone: the bare client's). With "job", the MultiGPUJob (suspended: no operator acts
    on it anyway) and the pods and Service the operator plans for it (plan/: env,
    labels, owner reference, DNS names as `dns_names` says); without, the bare client's.
    "status" is the operator's two writes of a normal start (Pending with the pods, then
    Running) and the Event posted with each."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        parts: set[str],
        pods: int,
        dns_names: str = DnsNames.EVERY_REPLICA,
    ):
        self.dns_names = dns_names
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.events = client.EventsV1Api(api)
        self.namespace, self.parts, self.pods = namespace, parts, pods

    async def job(self, name: str) -> None:
        pods = [bare_pod(f"{name}-{i}", name) for i in range(self.pods)]
        service, stored = bare_service(name), None
        if "job" in self.parts:
            manifest = job_manifest(name, self.pods, suspend=True, dns_names=self.dns_names)
            stored = await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, manifest
            )
            planned = plan_object(stored)
            assert not isinstance(planned, str), planned
            pods, service = [dict(p) for p in planned[1].pods], planned[1].service
        if "service" in self.parts:
            await self.core.create_namespaced_service(self.namespace, service)
        await asyncio.gather(*(self.core.create_namespaced_pod(self.namespace, p) for p in pods))
        if "status" in self.parts and stored is not None:
            for phase in ("Pending", "Running"):
                await self.custom.patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    name,
                    {"status": {"phase": phase}},
                    _content_type="application/merge-patch+json",
                )
                event = event_body(
                    stored, "Normal", f"Pods{phase}", phase, datetime.now(UTC), "bench"
                )
                await self.events.create_namespaced_event(self.namespace, event)

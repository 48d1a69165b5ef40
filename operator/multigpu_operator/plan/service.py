"""The job's headless Service: stable DNS names for its pods."""

from __future__ import annotations

from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.spec import DnsNames, Job
from multigpu_operator.plan.meta import job_labels, owner_references


def build_service(job: Job) -> dict[str, Any]:
    port = job.spec.master_port
    selector = {names.LABEL_JOB_NAME: job.ref.name}
    if job.spec.dns_names == DnsNames.REPLICA_0:
        # Pod 0's name alone: the endpoints change once, not with each pod's address.
        selector[names.LABEL_REPLICA_INDEX] = "0"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names.service_name(job.ref.name),
            "namespace": job.ref.namespace,
            "labels": job_labels(job),
            "ownerReferences": owner_references(job),
        },
        "spec": {
            # Headless: `<pod>.<service>` resolves to each pod's own IP.
            "clusterIP": "None",
            # Replica 0 (master or rendezvous host) must resolve while pods are still
            # starting, before anything could call them Ready.
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"name": "master", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }

"""spec.dnsNames on the real API server, controller-manager and operator: which pods the
job's headless Service gives a DNS name (its EndpointSlice's hostnames), and that the
choice cannot change once the job exists."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.jobs import RUN_LONG, JobEnv, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for

pytestmark = pytest.mark.cluster


def hostnames(jobs: JobEnv, service: str) -> list[str]:
    """The hostnames the endpoints controller published for `service` (CoreDNS serves
    `<hostname>.<service>.<namespace>.svc` from these)."""
    slices: Any = client.DiscoveryV1Api(jobs.api).list_namespaced_endpoint_slice(
        jobs.namespace, label_selector=f"kubernetes.io/service-name={service}"
    )
    return sorted(e.hostname for s in slices.items for e in s.endpoints or [] if e.hostname)


@pytest.mark.parametrize(
    ("dns_names", "want"),
    [
        ("EveryReplica", ["every-0", "every-1", "every-2"]),
        ("Replica0", ["replica0-0"]),
    ],
    ids=["every-replica", "replica-0"],
)
def test_the_service_names_the_pods_asked_for(
    operator: OperatorProcess, jobs: JobEnv, dns_names: str, want: list[str]
) -> None:
    name = want[0].rsplit("-", 1)[0]
    jobs.apply(job_manifest(name, replicas=3, annotations=RUN_LONG, dnsNames=dns_names))
    jobs.wait_phase(name, "Running")
    # Every pod has its address by now: the endpoints are final once they match.
    wait_for(lambda: hostnames(jobs, name) == want, f"{name}'s DNS names {want}")
    pods = {p.metadata.name: p for p in jobs.pods(name)}
    assert len(pods) == 3
    # Every pod keeps its own hostname and subdomain whichever the choice (its FQDN).
    assert {p.spec.hostname for p in pods.values()} == set(pods)
    assert {p.spec.subdomain for p in pods.values()} == {name}


def test_dns_names_is_immutable(jobs: JobEnv) -> None:
    jobs.apply(job_manifest("fixed", annotations=RUN_LONG))
    with pytest.raises(ApiException) as refused:
        jobs.patch_spec("fixed", {"dnsNames": "Replica0"})
    assert "spec.dnsNames is immutable" in str(refused.value.body)

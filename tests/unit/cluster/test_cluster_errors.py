"""The API server's answers become the controller's domain errors in one place
(cluster/errors.py, cluster/rest.py), and a refused pod names the field to fix
(cluster/admission.py). The wordings are the real server's (v1.36), checked against it
in tests/integration/test_operator_answers.py."""

from __future__ import annotations

import json

import pytest

from multigpu_operator.cluster.admission import refused_field
from multigpu_operator.cluster.errors import (
    AccessDenied,
    ClusterError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NamespaceTerminating,
    NotFound,
    QuotaExceeded,
    ServiceAccountMissing,
    from_status,
)
from multigpu_operator.cluster.rest import refusal

TERMINATING = (
    'pods "p" is forbidden: unable to create new content in namespace ns because it is being '
    "terminated"
)


@pytest.mark.parametrize(
    ("status", "message", "causes", "error"),
    [
        pytest.param(400, "strict decoding error", (), Invalid, id="bad-request"),
        pytest.param(422, "is invalid", (), Invalid, id="invalid"),
        pytest.param(404, 'namespaces "ns" not found', (), NotFound, id="not-found"),
        pytest.param(409, "already exists", (), Conflict, id="conflict"),
        pytest.param(410, "too old resource version", (), Gone, id="gone"),
        pytest.param(500, "etcdserver: request timed out", (), ClusterError, id="outage"),
        pytest.param(
            403, TERMINATING, ("NamespaceTerminating",), NamespaceTerminating, id="terminating"
        ),
        pytest.param(
            403,
            'pods is forbidden: User "system:serviceaccount:mgj:operator" cannot create '
            'resource "pods" in API group "" in the namespace "ns"',
            (),
            AccessDenied,
            id="rbac",
        ),
        pytest.param(
            403,
            'pods "p" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers '
            "to a resource you can't set finalizers on",
            (),
            AccessDenied,
            id="owner-reference-rbac",
        ),
        pytest.param(
            403,
            'pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=0, '
            "limited: pods=0",
            (),
            QuotaExceeded,
            id="quota",
        ),
        pytest.param(
            403,
            'pods "p" is forbidden: error looking up service account ns/default: '
            'serviceaccount "default" not found',
            (),
            ServiceAccountMissing,
            id="service-account-not-there-yet",
        ),
        pytest.param(
            403,
            'pods "p" is forbidden: no PriorityClass with name high was found',
            (),
            Forbidden,
            id="admission",
        ),
    ],
)
def test_an_answer_becomes_its_domain_error(
    status: int, message: str, causes: tuple[str, ...], error: type[ClusterError]
) -> None:
    got = from_status(status, message, causes)
    assert (type(got), got.message, got.status) == (error, message, status)


def test_the_status_body_of_an_error_answer_gives_message_and_causes() -> None:
    body = json.dumps(
        {
            "kind": "Status",
            "message": TERMINATING,
            "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata"}]},
            "code": 403,
        }
    ).encode()
    got = refusal(403, "Forbidden", body)
    assert (type(got), got.message) == (NamespaceTerminating, TERMINATING)


@pytest.mark.parametrize("body", [b"", b"upstream connect error", b"[1]", b'{"kind": "Status"}'])
def test_an_error_answer_without_a_status_body_keeps_its_reason(body: bytes) -> None:
    got = refusal(503, "Service Unavailable", body)
    assert (type(got), got.message, got.status) == (ClusterError, "Service Unavailable", 503)


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("no PriorityClass with name high was found", "spec.template.spec.priorityClassName"),
        (
            'error looking up service account ns/sa: serviceaccount "sa" not found',
            "spec.template.spec.serviceAccountName",
        ),
        ('pod rejected: RuntimeClass "nvidia" not found', "spec.template.spec.runtimeClassName"),
        (
            "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
            "spec.template.spec.overhead",
        ),
        (
            "the string value of PreemptionPolicy (Never) must not be provided in pod spec; "
            "priority admission controller computed PreemptLowerPriority from the given "
            "PriorityClass name",
            "spec.template.spec.preemptionPolicy",
        ),
        (
            "exceeded quota: q, requested: nvidia.com/gpu=8",
            "spec.template.spec.containers[].resources",
        ),
        (
            "maximum cpu usage per Container is 2, but limit is 4",
            "spec.template.spec.containers[].resources",
        ),
        ('violates PodSecurity "restricted:latest": privileged', "spec.template.spec"),
        ('admission webhook "policy.example.com" denied the request', "spec.template"),
    ],
)
def test_a_refusal_names_the_field_of_the_job(message: str, field: str) -> None:
    assert refused_field(f'pods "p" is forbidden: {message}') == field

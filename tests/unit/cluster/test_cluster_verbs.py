"""The requests each verb of cluster/api.py sends, as the API server sees them (method,
path, query, body, content type), and how mgj_api_requests_total counts them: the
shapes the integration tests and the chart's RBAC rely on. Over a recording double of
cluster/rest.py; the HTTP client itself is tested in test_cluster_rest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY

from multigpu_operator.cluster.api import Kube
from multigpu_operator.cluster.errors import Conflict, NotFound
from multigpu_operator.cluster.kinds import (
    EVENTS,
    JOBS,
    LEASES,
    NODES,
    PODS,
    SERVICES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from multigpu_operator.cluster.rest import JSON, MERGE_PATCH

pytestmark = pytest.mark.asyncio

MANAGER = {"fieldManager": "multigpu-operator"}
STRICT = {**MANAGER, "fieldValidation": "Strict"}
POD = {"metadata": {"name": "train-0"}}
ANSWER = {"metadata": {"name": "x", "resourceVersion": "5"}, "items": []}
Request = tuple[str, str, Mapping[str, str] | None, Any, str]


class RecordingRest:
    """Answers every request with ANSWER (or `error`), recording it."""

    def __init__(self, error: Exception | None = None) -> None:
        self.requests: list[Request] = []
        self.error = error

    async def call(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> bytes:
        self.requests.append((method, path, params, body, content_type))
        if self.error is not None:
            raise self.error
        return orjson.dumps(ANSWER)

    async def json(self, *args: Any) -> dict[str, Any]:
        answer: dict[str, Any] = orjson.loads(await self.call(*args))
        return answer

    async def lines(
        self, path: str, params: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[bytes]:
        self.requests.append(("WATCH", path, params, None, JSON))
        yield orjson.dumps({"type": "ADDED", "object": ANSWER})


async def watch_once(kube: Kube) -> None:
    async for _ in kube.watch(PODS, "7", "ns", "app=x", 60):
        pass


Verb = Callable[[Kube], Awaitable[Any]]
NS_PODS = "/api/v1/namespaces/ns/pods"
JOB = "/apis/multigpu.dev/v1alpha1/namespaces/ns/multigpujobs/train"
WORKLOAD = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/w"
LEASE = {"metadata": {"name": "l", "namespace": "ns", "resourceVersion": "3"}}

CASES: list[tuple[str, Verb, Request, tuple[str, str]]] = [
    (
        "pod-create-is-strict",
        lambda k: k.create(PODS, "ns", POD),
        ("POST", NS_PODS, STRICT, POD, JSON),
        ("create", "pods"),
    ),
    (
        "pod-dry-run",
        lambda k: k.create(PODS, "ns", POD, dry_run=True),
        ("POST", NS_PODS, {**STRICT, "dryRun": "All"}, POD, JSON),
        ("dry-run", "pods"),
    ),
    (
        "service-create",
        lambda k: k.create(SERVICES, "ns", POD),
        ("POST", "/api/v1/namespaces/ns/services", MANAGER, POD, JSON),
        ("create", "services"),
    ),
    (
        "event-create",
        lambda k: k.create(EVENTS, "ns", POD),
        ("POST", "/apis/events.k8s.io/v1/namespaces/ns/events", MANAGER, POD, JSON),
        ("create", "events"),
    ),
    (
        "job-status-patch-with-precondition",
        lambda k: k.patch(JOBS, "ns", "train", {"status": {"phase": "Running"}}, "7", "status"),
        (
            "PATCH",
            f"{JOB}/status",
            STRICT,
            {"status": {"phase": "Running"}, "metadata": {"resourceVersion": "7"}},
            MERGE_PATCH,
        ),
        ("patch", "multigpujobs/status"),
    ),
    (
        "workload-metadata-patch",
        lambda k: k.patch(WORKLOADS, "ns", "w", {"metadata": {"finalizers": []}}),
        ("PATCH", WORKLOAD, MANAGER, {"metadata": {"finalizers": []}}, MERGE_PATCH),
        ("patch", "workloads"),
    ),
    (
        "job-delete-with-uid-in-the-background",
        lambda k: k.delete(JOBS, "ns", "train", "u1", "Background"),
        (
            "DELETE",
            JOB,
            None,
            {"preconditions": {"uid": "u1"}, "propagationPolicy": "Background"},
            JSON,
        ),
        ("delete", "multigpujobs"),
    ),
    (
        "pod-delete-by-name",
        lambda k: k.delete(PODS, "ns", "train-0"),
        ("DELETE", f"{NS_PODS}/train-0", None, None, JSON),
        ("delete", "pods"),
    ),
    (
        "cluster-scoped-get",
        lambda k: k.get(WORKLOAD_PRIORITY_CLASSES, "ns", "high"),
        (
            "GET",
            "/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses/high",
            None,
            None,
            JSON,
        ),
        ("get", "workloadpriorityclasses"),
    ),
    (
        "label-selected-list",
        lambda k: k.list(PODS, None, "app=x"),
        ("GET", "/api/v1/pods", {"labelSelector": "app=x"}, None, JSON),
        ("list", "pods"),
    ),
    (
        "field-selected-list",
        lambda k: k.list(EVENTS, "ns", fields="regarding.name=train"),
        (
            "GET",
            "/apis/events.k8s.io/v1/namespaces/ns/events",
            {"fieldSelector": "regarding.name=train"},
            None,
            JSON,
        ),
        ("list", "events"),
    ),
    (
        "pod-log-read",
        lambda k: k.read(PODS, "ns", "train-0", "log", {"container": "trainer"}),
        ("GET", f"{NS_PODS}/train-0/log", {"container": "trainer"}, None, JSON),
        ("get", "pods/log"),
    ),
    (
        "job-create-under-the-clients-field-manager",
        lambda k: Kube(k.rest, "mgj").create(JOBS, "ns", POD),
        (
            "POST",
            "/apis/multigpu.dev/v1alpha1/namespaces/ns/multigpujobs",
            {"fieldManager": "mgj", "fieldValidation": "Strict"},
            POD,
            JSON,
        ),
        ("create", "multigpujobs"),
    ),
    (
        "node-list",
        lambda k: k.list(NODES),
        ("GET", "/api/v1/nodes", None, None, JSON),
        ("list", "nodes"),
    ),
    (
        "lease-replace",
        lambda k: k.replace(LEASES, LEASE),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
            MANAGER,
            LEASE,
            JSON,
        ),
        ("update", "leases"),
    ),
    (
        "watch-from-a-version-with-bookmarks",
        watch_once,
        (
            "WATCH",
            NS_PODS,
            {
                "watch": "true",
                "resourceVersion": "7",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "60",
                "labelSelector": "app=x",
            },
            None,
            JSON,
        ),
        ("watch", "pods"),
    ),
]


def _count(verb: str, resource: str) -> float:
    labels = {"verb": verb, "resource": resource}
    return REGISTRY.get_sample_value("mgj_api_requests_total", labels) or 0.0


@pytest.mark.parametrize(
    ("call", "request_", "counted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_each_verb_sends_its_request_and_counts_it(
    call: Verb, request_: Request, counted: tuple[str, str]
) -> None:
    rest = RecordingRest()
    before = _count(*counted)
    await call(Kube(rest))  # type: ignore[arg-type]
    assert rest.requests == [request_]
    assert _count(*counted) == before + 1


async def test_a_create_of_an_existing_name_is_none() -> None:
    kube = Kube(RecordingRest(Conflict("already exists", 409)))  # type: ignore[arg-type]
    assert await kube.create(PODS, "ns", POD) is None


@pytest.mark.parametrize("error", [NotFound("gone", 404), Conflict("uid", 409)])
async def test_a_delete_of_a_gone_object_is_no_error(error: Exception) -> None:
    kube = Kube(RecordingRest(error))  # type: ignore[arg-type]
    await kube.delete(PODS, "ns", "train-0", "u1")


async def test_a_followed_log_is_its_lines_counted_once() -> None:
    rest = RecordingRest()
    before = _count("get", "pods/log")
    kube = Kube(rest)  # type: ignore[arg-type]
    params = {"container": "trainer", "follow": "true"}
    lines = [line async for line in kube.stream(PODS, "ns", "train-0", "log", params)]
    assert lines == [orjson.dumps({"type": "ADDED", "object": ANSWER}).decode()]
    assert rest.requests == [("WATCH", f"{NS_PODS}/train-0/log", params, None, JSON)]
    assert _count("get", "pods/log") == before + 1

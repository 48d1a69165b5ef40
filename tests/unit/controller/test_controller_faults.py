"""The controller under the API server's expected answers and refusals, on the fake
cluster and its fake clock: a job gone (404), its namespace being deleted, a Service
deleted by hand, pods refused by admission or a full quota, a status refused. None of
them is an error: no traceback, nothing counted in mgj_reconcile_errors_total, no retry
every 2 s forever. tests/integration/test_operator_answers.py: the same on a real API
server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import REGISTRY

from multigpu_operator import metrics
from multigpu_operator.cluster.errors import (
    AccessDenied,
    Forbidden,
    Invalid,
    NamespaceTerminating,
    QuotaExceeded,
    ServiceAccountMissing,
    Waitable,
)
from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.cluster.kinds import JOBS, SERVICES
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]

KEY = ("ns", "train")
TERMINATING = (
    'pods "train-0" is forbidden: unable to create new content in namespace ns because it '
    "is being terminated"
)
QUOTA = (
    'pods "train-1" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, '
    "limited: pods=1"
)


def errors_counted() -> float:
    return REGISTRY.get_sample_value("mgj_reconcile_errors_total") or 0.0


def alarming(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log records a reader would take for trouble: warnings and worse, tracebacks."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


def job_info_series(jobs: Mapping[JobKey, Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """The mgj_job_info series /metrics would serve for these cached jobs."""
    collector = metrics.StateCollector(jobs.values, list)
    return [
        tuple(sample.labels.values())
        for family in collector.collect()
        if family.name == "mgj_job_info"
        for sample in family.samples
    ]


async def test_a_job_deleted_while_the_watch_is_down_is_forgotten_at_its_first_404(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    before = errors_counted()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec(runPolicy={"activeDeadlineSeconds": 600}))
        await asyncio.sleep(1)
        for name in ("train-0", "train-1"):
            cluster.set_phase(name, "Running")
        await asyncio.sleep(1)
        running = ("ns", "train", "DistributedDataParallel", "Running")
        assert job_info_series(controller.jobs) == [running]
        cluster.on_job_event = None  # kopf's watch is down: no DELETED event comes
        await cluster.delete(JOBS, "ns", "train", cluster.jobs[KEY]["metadata"]["uid"])
        writes = len(cluster.calls_of("patch multigpujobs/status"))
        await asyncio.sleep(1200)  # its pods went with it: a pass, and the deadline's timer
        assert KEY not in controller.jobs
        assert controller.queue.due(KEY) is None
        assert job_info_series(controller.jobs) == []
    # One write answered 404 (the pass its lost pods caused), then nothing more.
    assert len(cluster.calls_of("patch multigpujobs/status")) == writes + 1
    assert errors_counted() == before
    assert alarming(caplog) == []


async def test_deleting_a_job_during_its_pass_logs_nothing_alarming(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster(latency=0.1)  # every call takes a while: deletes overtake them
    before = errors_counted()
    async with running_controller(cluster) as controller:
        await asyncio.sleep(1)  # the pod and Service caches are filled
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(0)  # the job's pass starts, its children's creates under way
        await cluster.delete(JOBS, "ns", "train", cluster.jobs[KEY]["metadata"]["uid"])
        await asyncio.sleep(60)
        assert KEY not in controller.jobs
    # Its first status write waited for the pods, and the job was gone by then (garbage
    # collection takes the pods); a write answered 404 is not retried (the test above).
    assert len(cluster.calls_of("patch multigpujobs/status")) == 0
    assert errors_counted() == before
    assert alarming(caplog) == []


async def test_a_namespace_being_deleted_ends_its_jobs_without_a_retry_storm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    for method in ("create pods", "create services"):
        cluster.fail(method, NamespaceTerminating(TERMINATING, 403), times=100)
    before = errors_counted()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(300)
        assert KEY not in controller.jobs  # the namespace's deletion takes the job along
        assert controller.queue.due(KEY) is None
    # The first pass, and one for the watch event of its own status write: no retries.
    assert len(cluster.calls_of("create services")) <= 2
    assert cluster.calls_of("create pods") == []  # the Service first, and it was refused
    assert errors_counted() == before
    assert alarming(caplog) == []


async def test_a_service_deleted_by_hand_is_created_again_without_a_get_per_pass() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        for phase in ("Running", "Succeeded"):  # passes that need no Service call
            cluster.set_phase("train-0", phase, exit_code=0 if phase == "Succeeded" else None)
            await asyncio.sleep(1)
        assert len(cluster.calls_of("create services")) == 1
        cluster.remove(SERVICES, "train")
        await asyncio.sleep(1)
        assert KEY in cluster.services
    assert len(cluster.calls_of("create services")) == 2
    # No read per pass (the fake has none to make): the Service cache was listed once.
    assert len(cluster.calls_of("list services")) == 1


async def test_a_service_missing_while_the_operator_was_down_is_created_on_start() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
    # Killed between the Service and the pods, or the Service deleted while it was down.
    cluster.remove(SERVICES, "train")
    async with running_controller(cluster) as controller:
        controller.job_event("ADDED", cluster.jobs[KEY])  # kopf lists the jobs on start
        await asyncio.sleep(1)
    assert KEY in cluster.services
    created = cluster.condition("train", "Created")
    assert (created["status"], created["reason"]) == ("True", "PodsCreated")


async def test_a_refused_service_fails_the_job_and_created_claims_no_service() -> None:
    cluster = FakeCluster()
    message = 'Service "train" is invalid: metadata.name: Invalid value: "train"'
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        cluster.fail("create services", Invalid(message, 422))
        cluster.remove(SERVICES, "train")
        await asyncio.sleep(60)
    failed, created = cluster.condition("train", "Failed"), cluster.condition("train", "Created")
    assert (failed["reason"], failed["message"]) == (
        "ServiceRefused",
        f"the job's headless Service: {message}",
    )
    assert (created["status"], created["reason"]) == ("False", "ServiceRefused")
    assert len(cluster.calls_of("create services")) == 2


ADMISSION = [
    pytest.param(
        'pods "train-0" is forbidden: no PriorityClass with name high was found',
        "spec.template.spec.priorityClassName",
        id="priority-class",
    ),
    pytest.param(
        'pods "train-0" is forbidden: pod rejected: RuntimeClass "nvidia" not found',
        "spec.template.spec.runtimeClassName",
        id="runtime-class",
    ),
    pytest.param(
        'pods "train-0" is forbidden: pod rejected: Pod Overhead set without corresponding '
        "RuntimeClass defined Overhead",
        "spec.template.spec.overhead",
        id="overhead",
    ),
    pytest.param(
        'pods "train-0" is forbidden: the string value of PreemptionPolicy (Never) must not be '
        "provided in pod spec; priority admission controller computed PreemptLowerPriority "
        "from the given PriorityClass name",
        "spec.template.spec.preemptionPolicy",
        id="preemption-policy",
    ),
]


@pytest.mark.parametrize(("refusal", "field"), ADMISSION)
async def test_a_pod_refused_by_admission_fails_the_job_naming_the_field(
    refusal: str, field: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    cluster.fail("create pods", Forbidden(refusal, 403), times=2)
    before = errors_counted()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(300)
    failed = cluster.condition("train", "Failed")
    assert (failed["reason"], failed["message"]) == ("PodForbidden", f"{field}: {refusal}")
    assert ("Warning", "PodForbidden") in {(e.type, e.reason) for e in cluster.events}
    assert len(cluster.calls_of("create pods")) == 2  # not retried
    assert cluster.pod_names() == set()
    assert errors_counted() == before
    assert alarming(caplog) == []


NO_ACCOUNT = (
    'pods "train-0" is forbidden: error looking up service account ns/trainer: '
    'serviceaccount "trainer" not found'
)


@pytest.mark.parametrize(
    ("refusal", "field"),
    [
        pytest.param(
            QuotaExceeded(QUOTA, 403),
            "spec.template.spec.containers[].resources",
            id="full-quota",
        ),
        # Applied beside the job, or the namespace's default one not created yet.
        pytest.param(
            ServiceAccountMissing(NO_ACCOUNT, 403),
            "spec.template.spec.serviceAccountName",
            id="service-account-not-there-yet",
        ),
    ],
)
async def test_what_may_pass_is_waited_for_with_backoff_then_the_pods_are_created(
    refusal: Waitable, field: str
) -> None:
    cluster = FakeCluster()
    cluster.fail("create pods", refusal, times=1000)
    before = errors_counted()
    async with running_controller(cluster, retry_base_seconds=2, retry_max_seconds=60):
        cluster.add_job("train", ddp_spec(replicas=1))
        await asyncio.sleep(1)
        created = cluster.condition("train", "Created")
        assert (created["status"], created["reason"]) == ("False", refusal.reason)
        assert created["message"] == f"{field}: {refusal.message}"
        assert cluster.status("train")["phase"] == "Pending"
        await asyncio.sleep(600)
        # Backoff doubling to a minute, not a try every 2 s (300 of them).
        assert len(cluster.calls_of("create pods")) <= 16
        cluster.heal("create pods")  # the quota has room, the ServiceAccount is there
        await asyncio.sleep(61)
    assert cluster.pod_names() == {"train-0"}
    assert cluster.condition("train", "Created")["reason"] == "PodsCreated"
    assert [e.reason for e in cluster.events].count(refusal.reason) == 1
    assert errors_counted() == before


async def test_the_operators_own_rbac_denial_is_an_error_retried_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    denied = (
        'pods is forbidden: User "system:serviceaccount:mgj:operator" cannot create '
        'resource "pods" in API group "" in the namespace "ns"'
    )
    cluster.fail("create pods", AccessDenied(denied, 403), times=4)
    before = errors_counted()
    async with running_controller(cluster, retry_base_seconds=2, retry_max_seconds=60):
        cluster.add_job("train", ddp_spec(replicas=1))
        await asyncio.sleep(60)
    assert cluster.pod_names() == {"train-0"}  # created once RBAC allowed it
    assert "Failed" not in cluster.status("train").get("phase", "")
    assert errors_counted() == before + 4
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [denied in r.getMessage() for r in errors] == [True] * 4
    assert not any(r.exc_info for r in caplog.records)


async def test_a_status_the_server_refuses_fails_the_job_with_its_message() -> None:
    cluster = FakeCluster()
    refused = (
        'MultiGPUJob.multigpu.dev "train" is invalid: status.worldSize: Invalid value: '
        "4294967294: status.worldSize in body should be less than or equal to 2147483647"
    )
    cluster.fail("patch multigpujobs/status", Invalid(refused, 422))
    before = errors_counted()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(60)
    failed = cluster.condition("train", "Failed")
    assert (failed["reason"], failed["message"]) == (
        "InvalidSpec",
        f"the job's status was refused: {refused}",
    )
    assert cluster.pod_names() == set()
    assert errors_counted() == before

"""A job that creates no pods yet (suspended) has its template checked at once by a
server-side dry run of its first pod, on the in-memory cluster (support/fake_cluster.py)
and looptime's fake clock. The same on a real API server:
tests/integration/test_operator_answers.py."""

from __future__ import annotations

import asyncio

import pytest

from multigpu_operator.cluster.errors import (
    ClusterError,
    Invalid,
    QuotaExceeded,
    ServiceAccountMissing,
    Unreachable,
)
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]

# The API server's own answer (v1.36) to a pod with this misspelt field.
TYPO = (
    'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
    'unknown field "spec.containers[0].imagePullPolicyy"'
)


async def test_a_suspended_job_with_a_misspelt_field_fails_at_once_naming_it() -> None:
    cluster = FakeCluster()
    cluster.fail("dry-run pods", Invalid(TYPO, 400))
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(suspend=True))
        await asyncio.sleep(1)
    status = cluster.status("train")
    failed = cluster.condition("train", "Failed")
    assert (status["phase"], failed["reason"], failed["message"]) == (
        "Failed",
        "InvalidPodTemplate",
        TYPO,
    )
    # The pass's own status underneath: the job never ran, it was suspended.
    assert cluster.condition("train", "Suspended")["status"] == "True"
    assert ("Warning", "InvalidPodTemplate", TYPO) in {
        (e.type, e.reason, e.message) for e in cluster.events
    }
    assert [c.args for c in cluster.calls_of("dry-run pods")] == [("ns", "train-0")]
    assert cluster.pod_names() == set()


async def test_a_valid_suspended_job_is_checked_once_per_generation_and_stays_suspended() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec(suspend=True))
        await asyncio.sleep(1)
        assert cluster.status("train")["phase"] == "Suspended"
        controller.enqueue(("ns", "train"))  # more passes of the same generation
        await asyncio.sleep(10)
    assert cluster.status("train")["phase"] == "Suspended"
    assert len(cluster.calls_of("dry-run pods")) == 1
    assert not cluster.calls_of("create pods")


@pytest.mark.parametrize(
    ("error", "dry_runs"),
    [
        # Transient: the pass is retried after the backoff, the dry run with it.
        pytest.param(Unreachable("ClientConnectorError: refused"), 3, id="unreachable"),
        pytest.param(ClusterError("etcdserver: request timed out", 500), 3, id="5xx"),
        pytest.param(ClusterError("Too many requests", 429), 3, id="429"),
        # The template passed validation: what may pass is waited for once pods are created.
        pytest.param(
            QuotaExceeded('pods "train-0" is forbidden: exceeded quota: q', 403), 1, id="quota"
        ),
        pytest.param(
            ServiceAccountMissing(
                'pods "train-0" is forbidden: error looking up service account ns/default: '
                'serviceaccount "default" not found',
                403,
            ),
            1,
            id="service-account-not-there-yet",
        ),
        # A webhook with side effects cannot take part in a dry run: nothing to learn.
        pytest.param(
            Invalid('admission webhook "w.example.com" does not support dry run', 400),
            1,
            id="webhook-without-dry-run",
        ),
    ],
)
async def test_an_answer_that_is_not_the_templates_fault_does_not_fail_the_job(
    error: ClusterError, dry_runs: int
) -> None:
    cluster = FakeCluster()
    cluster.fail("dry-run pods", error, times=2)
    async with running_controller(cluster, retry_base_seconds=2):
        cluster.add_job("train", ddp_spec(suspend=True))
        await asyncio.sleep(30)
    assert cluster.status("train")["phase"] == "Suspended"
    assert "Failed" not in {c["type"] for c in cluster.status("train")["conditions"]}
    assert len(cluster.calls_of("dry-run pods")) == dry_runs

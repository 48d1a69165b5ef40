"""When the operator may trust the API server's validation of a job (api/server_rules.py)
instead of evaluating the CRD's rules again (issue 15: the largest cost of a new job)."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from multigpu_operator.api.crd import crd
from multigpu_operator.api.server_rules import checked_by_server, rules_enforced_since
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster

CHANGED = "2026-11-24T01:00:00Z"
SINCE = datetime(2026, 11, 24, 1, 0, 0, tzinfo=UTC)


def installed(changed: str = CHANGED) -> dict[str, Any]:
    """Our CRD as the API server stores it, last changed at `changed`."""
    obj = copy.deepcopy(crd())
    obj["metadata"]["managedFields"] = [
        {"manager": "helm", "operation": "Update", "time": "2026-11-20T00:00:00Z"},
        {"manager": "kubectl", "operation": "Apply", "time": changed},
        # The server's own conditions, later: not a change of the rules.
        {"manager": "kube-apiserver", "time": "2026-11-25T00:00:00Z", "subresource": "status"},
    ]
    return obj


def without_rules() -> dict[str, Any]:
    obj = installed()
    schema = obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"].pop("x-kubernetes-validations")
    return obj


def unknown_time() -> dict[str, Any]:
    obj = installed()
    obj["metadata"]["managedFields"] = []
    return obj


def taken_over() -> dict[str, Any]:
    """`helm install`, then `kubectl apply --server-side --force-conflicts`: helm's entry
    keeps no time."""
    obj = installed()
    obj["metadata"]["managedFields"][0] = {"manager": "helm", "operation": "Apply"}
    return obj


SEEN = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)  # when the operator first saw it


@pytest.mark.parametrize(
    ("crd_object", "since"),
    [
        (installed(), SINCE),  # ours, last changed at CHANGED
        (without_rules(), None),  # an older or edited CRD: its rules are not ours
        (unknown_time(), SEEN),  # when it changed is unknown: since the operator saw it
        (taken_over(), SEEN),
    ],
    ids=["ours", "other-rules", "no-time", "taken-over"],
)
def test_the_server_enforces_our_rules_since_the_crd_last_changed(
    crd_object: dict[str, Any], since: datetime | None
) -> None:
    assert rules_enforced_since(crd_object, crd(), SEEN) == since


def job(created: str | None, generation: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "generation": generation}
    if created:
        meta["creationTimestamp"] = created
    return {"metadata": meta, "spec": ddp_spec()}


@pytest.mark.parametrize(
    ("obj", "since", "trusted"),
    [
        (job("2026-11-24T01:00:01Z"), SINCE, True),  # created after the CRD changed
        (job("2026-11-24T01:00:00Z"), SINCE, False),  # the same second: unknown order
        (job("2026-11-23T09:00:00Z"), SINCE, False),  # stored before the CRD changed
        (job("2026-11-24T01:00:01Z", generation=2), SINCE, False),  # spec edited since
        (job(None), SINCE, False),  # no creation time
        (job("2026-11-24T01:00:01Z"), None, False),  # the CRD's rules are not ours
    ],
)
def test_a_job_is_trusted_only_if_created_under_our_rules_and_never_edited(
    obj: dict[str, Any], since: datetime | None, trusted: bool
) -> None:
    assert checked_by_server(obj, since) is trusted


def validations() -> float:
    return REGISTRY.get_sample_value("mgj_spec_validations_total") or 0.0


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
async def test_the_controller_validates_only_jobs_the_server_did_not_check() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster) as controller:
        before = validations()
        cluster.add_job("old", ddp_spec())  # before the CRD event: validated here
        await asyncio.sleep(1)
        # Our CRD, changed before the fake's jobs are created (2026-11-22T10:00:00Z).
        controller.crd_event("ADDED", installed("2026-11-22T09:00:00Z"))
        cluster.add_job("new", ddp_spec())
        await asyncio.sleep(1)
        assert validations() - before == 1
        controller.crd_event("DELETED", installed())
        cluster.add_job("after", ddp_spec())
        await asyncio.sleep(1)
        assert validations() - before == 2
    for name in ("old", "new", "after"):
        assert cluster.status(name)["phase"] == "Pending"


@pytest.mark.asyncio
@pytest.mark.looptime(end=3600)
async def test_a_crd_changed_at_an_unknown_time_is_trusted_from_when_the_operator_saw_it() -> None:
    async with running_controller(FakeCluster()) as controller:
        seen = taken_over()
        seen["metadata"]["generation"] = 1
        controller.crd_event("ADDED", seen)
        since = controller.plans.server_rules_since
        assert since is not None
        await asyncio.sleep(60)
        controller.crd_event("MODIFIED", seen)  # its status, say: the same generation
        assert controller.plans.server_rules_since == since
        changed = copy.deepcopy(seen)
        changed["metadata"]["generation"] = 2
        controller.crd_event("MODIFIED", changed)
        assert controller.plans.server_rules_since == since + timedelta(seconds=60)

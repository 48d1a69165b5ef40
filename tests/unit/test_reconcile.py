"""Desired vs observed pods -> the actions that close the gap."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.spec import Job, JobRef, JobSpec, Mode
from multigpu_operator.plan import plan_job
from multigpu_operator.policy.status import Phase
from multigpu_operator.reconcile import plan_actions

JOB = Job(
    ref=JobRef("ns", "job", "uid-1"),
    spec=JobSpec(
        mode=Mode.DISTRIBUTED_DATA_PARALLEL,
        replicas=4,
        template={"spec": {"containers": [{"name": "trainer", "image": "t"}]}},
    ),
)


def observed(*indexes: int, deleting: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    pods = []
    for i in indexes:
        meta: dict[str, Any] = {
            "name": f"job-{i}",
            "labels": {"multigpu.dev/replica-index": str(i)},
        }
        if i in deleting:
            meta["deletionTimestamp"] = "2026-11-22T10:00:00Z"
        pods.append({"metadata": meta})
    return pods


@pytest.mark.parametrize(
    ("existing", "phase", "create", "delete"),
    [
        pytest.param((), None, ["job-0", "job-1", "job-2", "job-3"], [], id="new-job"),
        pytest.param((0, 2), Phase.PENDING, ["job-1", "job-3"], [], id="restart-mid-creation"),
        pytest.param((0, 1, 2, 3), Phase.RUNNING, [], [], id="complete"),
        pytest.param((0, 1, 2, 3, 5, 4), Phase.RUNNING, [], ["job-5", "job-4"], id="scaled-down"),
        pytest.param((), Phase.SUCCEEDED, [], [], id="finished-gets-no-pods"),
        pytest.param((0,), Phase.FAILED, [], [], id="failed-gets-no-pods"),
    ],
)
def test_actions_close_the_gap(
    existing: tuple[int, ...], phase: Phase | None, create: list[str], delete: list[str]
) -> None:
    actions = plan_actions(plan_job(JOB), observed(*existing), phase)

    assert [p["metadata"]["name"] for p in actions.create_pods] == create
    assert list(actions.delete_pods) == delete


def test_a_pod_already_being_deleted_is_not_deleted_again() -> None:
    actions = plan_actions(plan_job(JOB), observed(0, 1, 2, 3, 4, deleting=(4,)), Phase.RUNNING)
    assert actions.empty

"""Which pass sends a job's first pod as a server-side dry run (pure): one that creates
no pods, of a job without live pods, once per generation."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.plan import plan_job
from multigpu_operator.reconcile import decide
from support.policy import at, inputs, job, pod, running, written

SUSPENDED = {"phase": "Suspended", "conditions": [written("Suspended")]}
FAILED = {"phase": "Failed", "conditions": [written("Failed")]}
LEAVING = [pod(0, deleting=True), pod(1, deleting=True)]  # their names are not free yet


def dry_run(
    j: Job, pods: list[dict[str, Any]], previous: dict[str, Any], checked: int | None
) -> str | None:
    decision = decide(inputs(j, pods, previous, at(0), template_checked=checked))
    sent = decision.dry_run_pod
    return None if sent is None else sent["metadata"]["name"]


@pytest.mark.parametrize(
    ("j", "pods", "previous", "checked", "sent"),
    [
        pytest.param(job(suspend=True), [], {}, None, "job-0", id="created-suspended"),
        pytest.param(job(suspend=True), [], SUSPENDED, 1, None, id="this-generation-checked"),
        pytest.param(job(suspend=True), [], SUSPENDED, 0, "job-0", id="an-older-one-checked"),
        pytest.param(job(), [], {}, None, None, id="its-pods-are-created-now"),
        pytest.param(job(), running(0, 1), {}, None, None, id="its-pods-run"),
        pytest.param(job(), LEAVING, {"attempt": 2}, None, "job-0", id="old-pods-leaving"),
        pytest.param(job(suspend=True), [], FAILED, None, None, id="finished"),
    ],
)
def test_pod_to_dry_run(
    j: Job, pods: list[dict[str, Any]], previous: dict[str, Any], checked: int | None, sent: str
) -> None:
    assert dry_run(j, pods, previous, checked) == sent


def test_the_pod_sent_is_the_first_one_created_later_with_the_attempt_label() -> None:
    j = job(suspend=True)
    desired = plan_job(j)
    decision = decide(inputs(j, [], {"attempt": 3, **SUSPENDED}, at(0)))
    sent = decision.dry_run_pod
    assert sent is not None
    assert sent["spec"] == desired.pods[0]["spec"]
    assert sent["metadata"]["labels"]["multigpu.dev/attempt"] == "3"

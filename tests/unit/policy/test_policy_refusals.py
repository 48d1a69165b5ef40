"""What the API server refused in a job's last pass, as the next pass's status (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.policy.kube.conditions import Event
from multigpu_operator.policy.step import Decision
from multigpu_operator.policy.steps.refusals import Refusal, Refused, after_refusal
from support.policy import at, stamp, written

RUNNING = {
    "phase": "Running",
    "attempt": 1,
    "startTime": stamp(-60),
    "conditions": [written("Created", True, "PodsCreated")],
}
# The pass the refusal is read in: its own status, and pods it would create.
PASS = JobStatus(phase=Phase.PENDING, attempt=1, restarts=0, start_time=stamp(0))
QUOTA = "exceeded quota: q, requested: nvidia.com/gpu=8"
DENIED = 'pods "job-0" is forbidden: no PriorityClass with name nope was found'
FIELD = "spec.template.spec.priorityClassName"
NO_ACCOUNT = (
    'pods "job-1" is forbidden: error looking up service account ns/default: '
    'serviceaccount "default" not found'
)
ACCOUNT = "spec.template.spec.serviceAccountName"


def refusal(refused: Refused, message: str, **kind: Any) -> Refusal:
    return Refusal("uid-1", refused, message, **kind)


def next_pass(waits: bool, previous: dict[str, Any], refused: Refusal, now: datetime) -> Decision:
    """The pass after `refused`. `waits`: the refused pass (PASS, creating pods) had not
    written its status, so the refusal carries it (the actuator does that)."""
    unwritten = PASS if waits or refused.refused == "PodTemplate" else None
    return after_refusal(JobStatus.read(previous), 1, replace(refused, unwritten=unwritten), now)


def conditions(status: JobStatus) -> dict[str, tuple[str, str | None, str | None]]:
    return {c.type: (c.status, c.reason, c.message) for c in status.conditions or ()}


@pytest.mark.parametrize(
    ("previous", "waits", "refused", "phase", "failed", "created", "events"),
    [
        pytest.param(
            {},
            True,
            refusal("Pod", "spec.containers[0].image: Required value", invalid=True),
            Phase.FAILED,
            ("InvalidPodTemplate", "spec.containers[0].image: Required value"),
            None,
            ("Warning", "InvalidPodTemplate"),
            id="invalid-pod-of-a-new-job-fails-from-the-pass-status",
        ),
        pytest.param(
            RUNNING,
            False,
            refusal("Pod", DENIED, field=FIELD),
            Phase.FAILED,
            ("PodForbidden", f"{FIELD}: {DENIED}"),
            ("True", "PodsCreated", None),
            ("Warning", "PodForbidden"),
            id="admission-names-the-field-and-fails-from-the-stored-status",
        ),
        pytest.param(
            RUNNING,
            False,
            refusal("Service", "spec.ports: Invalid", invalid=True),
            Phase.FAILED,
            ("ServiceRefused", "the job's headless Service: spec.ports: Invalid"),
            ("False", "ServiceRefused", "the job's headless Service: spec.ports: Invalid"),
            ("Warning", "ServiceRefused"),
            id="a-refused-service-fails-and-created-stops-claiming-it",
        ),
        pytest.param(
            {},
            True,
            refusal(
                "Pod",
                QUOTA,
                waits="QuotaExceeded",
                field="spec.template.spec.containers[].resources",
            ),
            Phase.PENDING,
            None,
            ("False", "QuotaExceeded", f"spec.template.spec.containers[].resources: {QUOTA}"),
            ("Warning", "QuotaExceeded"),
            id="a-full-quota-is-waited-for",
        ),
        pytest.param(
            RUNNING,
            False,
            refusal("Pod", NO_ACCOUNT, waits="ServiceAccountMissing", field=ACCOUNT),
            Phase.RUNNING,
            None,
            ("False", "ServiceAccountMissing", f"{ACCOUNT}: {NO_ACCOUNT}"),
            ("Warning", "ServiceAccountMissing"),
            id="a-missing-service-account-is-waited-for",
        ),
    ],
)
def test_a_refusal_becomes_the_status_of_the_next_pass(
    previous: dict[str, Any],
    waits: bool,
    refused: Refusal,
    phase: Phase,
    failed: tuple[str, str] | None,
    created: tuple[str, str, str | None] | None,
    events: tuple[str, str],
) -> None:
    decision = next_pass(waits, previous, refused, at(5))
    assert decision.only_status
    assert (decision.create_pods, decision.delete_pods) == ((), ())
    assert decision.status.phase is phase
    got = conditions(decision.status)
    if failed:
        assert got["Failed"][1:] == failed
        assert decision.entered is Phase.FAILED
    if created:
        status, reason, message = got["Created"]
        assert (status, reason) == created[:2]
        assert created[2] in (None, message)
    assert [(e.type, e.reason) for e in decision.events] == [events]
    assert decision.waiting == (decision.events[0].message if refused.waits else "")


def test_a_full_quota_warns_once_not_on_every_retry() -> None:
    refused = refusal("Pod", QUOTA, waits="QuotaExceeded", field="f")
    first = next_pass(True, {}, refused, at(5))
    again = next_pass(False, first.status.as_api(), refused, at(9))
    assert again.events == ()
    assert again.waiting


def test_a_refused_status_fails_the_job_from_the_status_stored_and_looks_again() -> None:
    refused = refusal("Status", "status.worldSize: must be <= 2147483647", invalid=True)
    decision = next_pass(False, RUNNING, refused, at(5))
    # From the status stored, not from the pass's, which the server refused.
    assert decision.status.as_api()["startTime"] == RUNNING["startTime"] != stamp(0)
    assert conditions(decision.status)["Failed"][1:] == (
        "InvalidSpec",
        "the job's status was refused: status.worldSize: must be <= 2147483647",
    )
    assert decision.events[0] == Event("Warning", "InvalidSpec", decision.events[0].message)
    assert decision.requeue_after == 0

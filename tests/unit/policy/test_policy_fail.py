"""Failing a job, the one way: in a pass, and for a spec or template it cannot run (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.failures.fail import fail, invalid_job
from multigpu_operator.policy.kube.conditions import Event, cleared, condition
from support.policy import at, stamp, written

C = ConditionType


def test_a_failure_ends_the_pass_and_clears_running_and_restarting() -> None:
    failed = fail("GangTimeout", "why")
    assert failed.changes == (
        cleared(C.RUNNING, "GangTimeout", "why"),
        cleared(C.RESTARTING, "GangTimeout", "why"),
        condition(C.FAILED, True, "GangTimeout", "why"),
    )
    assert failed.stop is Phase.FAILED


@pytest.mark.parametrize(
    ("previous", "conditions"),
    [
        pytest.param({}, {"Failed": ("True", "InvalidSpec")}, id="new"),
        pytest.param(
            {
                "phase": "Running",
                "startTime": stamp(-60),
                "conditions": [
                    written("Created", True, "PodsCreated"),
                    written("Running", True, "PodsRunning"),
                ],
            },
            {
                "Created": ("True", "PodsCreated"),
                "Running": ("False", "InvalidSpec"),
                "Failed": ("True", "InvalidSpec"),
            },
            id="running",
        ),
    ],
)
def test_an_invalid_job_fails_and_nothing_else_changes(
    previous: dict[str, Any], conditions: dict[str, tuple[str, str]]
) -> None:
    update = invalid_job(JobStatus.read(previous), 2, "InvalidSpec", "spec.replicas: bad", at(0))
    assert update.entered is Phase.FAILED
    assert update.events == (Event("Warning", "InvalidSpec", "spec.replicas: bad"),)
    status = update.status.as_api()
    assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]} == conditions
    rest = {k: v for k, v in status.items() if k != "conditions"}
    assert rest == {
        **{k: v for k, v in previous.items() if k != "conditions"},
        "phase": "Failed",
        "reason": "InvalidSpec",
        "observedGeneration": 2,
        "completionTime": stamp(0),
    }


def test_a_failed_job_is_left_as_it_is() -> None:
    previous = {"phase": "Failed", "conditions": [written("Failed", True, "InvalidSpec")]}
    update = invalid_job(JobStatus.read(previous), 3, "InvalidPodTemplate", "no", at(0))
    assert (update.status.as_api(), update.events, update.entered) == (previous, (), None)

"""Conditions change only on transitions, each transition to True an Event (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.status import ConditionType, JobStatus
from multigpu_operator.policy.kube.conditions import (
    ConditionChange,
    Conditions,
    Event,
    cleared,
    condition,
)
from multigpu_operator.policy.kube.timestamps import parse_time
from support.policy import written

NOW = "2026-11-22T10:00:00Z"
C = ConditionType


def conditions_of(previous: list[dict[str, Any]], generation: int) -> Conditions:
    """Conditions over a status stored with `previous`, changed at NOW."""
    at = parse_time(NOW)
    assert at is not None
    return Conditions(JobStatus.read({"conditions": previous}), generation, at)


def listed(conditions: Conditions) -> list[dict[str, Any]]:
    """The conditions as the status write sends them."""
    return [
        c.model_dump(mode="json", by_alias=True, exclude_unset=True) for c in conditions.as_list()
    ]


@pytest.mark.parametrize(
    ("previous", "changes", "expected", "events"),
    [
        pytest.param(
            [],
            [condition(C.RUNNING, True, "PodsRunning", "2 pods running")],
            {"Running": ("True", "PodsRunning", NOW)},
            [Event("Normal", "PodsRunning", "2 pods running")],
            id="new-true-is-an-event",
        ),
        pytest.param(
            [],
            [condition(C.SCHEDULED, False, "Unschedulable", "m")],
            {"Scheduled": ("False", "Unschedulable", NOW)},
            [],
            id="new-false-is-no-event",
        ),
        pytest.param(
            [written("Running", True, "PodsRunning")],
            [condition(C.RUNNING, True, "PodsRunning", "3 pods running")],
            {"Running": ("True", "PodsRunning", "2026-11-22T09:00:00Z")},
            [],
            id="same-status-and-reason-keeps-its-time",
        ),
        pytest.param(
            [written("Restarting", True, "PodFailed")],
            [condition(C.RESTARTING, True, "PodFailed", "again", always_event=True)],
            {"Restarting": ("True", "PodFailed", "2026-11-22T09:00:00Z")},
            [Event("Warning", "PodFailed", "again")],
            id="always-event-even-without-a-transition",
        ),
        pytest.param(
            [written("Scheduled", False, "Unschedulable")],
            [condition(C.SCHEDULED, False, "GangTimeout", "m")],
            {"Scheduled": ("False", "GangTimeout", NOW)},
            [],
            id="a-new-reason-is-a-transition",
        ),
        pytest.param(
            [],
            [cleared(C.RESTARTING, "Recovered", "m")],
            {},
            [],
            id="cleared-never-shows-a-condition-that-never-held",
        ),
        pytest.param(
            [written("Running", False, "Suspended")],
            [cleared(C.RUNNING, "Restarting", "m")],
            {"Running": ("False", "Suspended", "2026-11-22T09:00:00Z")},
            [],
            id="cleared-leaves-a-false-condition-alone",
        ),
        pytest.param(
            [written("Running", True, "PodsRunning")],
            [cleared(C.RUNNING, "Restarting", "m")],
            {"Running": ("False", "Restarting", NOW)},
            [],
            id="cleared-turns-true-to-false-without-an-event",
        ),
        pytest.param(
            [],
            [
                condition(C.SUSPENDED, True, "Suspended", "s"),
                Event("Normal", "Scaled", "x"),
                condition(C.FAILED, True, "GangTimeout", "f"),
            ],
            {"Suspended": ("True", "Suspended", NOW), "Failed": ("True", "GangTimeout", NOW)},
            [
                Event("Normal", "Suspended", "s"),
                Event("Normal", "Scaled", "x"),
                Event("Warning", "GangTimeout", "f"),
            ],
            id="events-in-the-order-decided-failed-is-a-warning",
        ),
    ],
)
def test_condition_changes(
    previous: list[dict[str, Any]],
    changes: list[ConditionChange | Event],
    expected: dict[str, tuple[str, str, str]],
    events: list[Event],
) -> None:
    conditions = conditions_of(previous, 2)
    conditions.apply(changes)
    got = {
        c["type"]: (c["status"], c["reason"], c["lastTransitionTime"]) for c in listed(conditions)
    }
    assert got == expected
    assert conditions.events == events


def test_every_changed_condition_records_the_generation_and_message() -> None:
    conditions = conditions_of([written("Running", True, "PodsRunning")], 2)
    conditions.apply([condition(C.RUNNING, True, "PodsRunning", "3 pods running")])
    [running] = listed(conditions)
    assert (running["message"], running["observedGeneration"]) == ("3 pods running", 2)


def test_conditions_are_listed_in_the_order_of_their_types() -> None:
    conditions = conditions_of([], 1)
    conditions.apply(
        [
            condition(C.FAILED, True, "r", "m"),
            condition(C.CREATED, True, "r", "m"),
            condition(C.RUNNING, False, "r", "m"),
        ]
    )
    assert [c["type"] for c in listed(conditions)] == ["Created", "Running", "Failed"]

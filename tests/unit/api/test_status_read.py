"""JobStatus.read: a stored status read as the model, validated once per distinct status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from multigpu_operator.api.status import JobStatus, Phase

STORED: dict[str, Any] = {
    "phase": "Running",
    "conditions": [
        {
            "type": "Running",
            "status": "True",
            "reason": "PodsRunning",
            "lastTransitionTime": "2026-11-27T10:00:00Z",
            "observedGeneration": 1,
        }
    ],
    "pods": {"pending": 0, "running": 8, "succeeded": 0, "failed": 0},
    "attempts": [{"attempt": 1, "startTime": "2026-11-27T10:00:00Z"}],
    "lastFailure": {"pod": "j-0", "exitCode": None},
    "attempt": 1,
}


@pytest.mark.parametrize(
    "stored",
    [
        pytest.param({}, id="empty"),
        pytest.param(STORED, id="json"),
        pytest.param(
            {**STORED, "startTime": datetime(2026, 11, 27, 10, tzinfo=UTC)}, id="python-datetime"
        ),
        pytest.param({**STORED, "phase": Phase.RUNNING}, id="python-enum"),
    ],
)
def test_read_is_validation(stored: dict[str, Any]) -> None:
    """The same model, the same fields set and the same JSON as a validation of it."""
    read, validated = JobStatus.read(stored), JobStatus.model_validate(stored)
    assert read == validated
    assert read.model_fields_set == validated.model_fields_set
    assert read.as_api() == validated.as_api()


def test_a_status_read_before_is_not_validated_again() -> None:
    first = JobStatus.read(STORED)
    assert JobStatus.read({**STORED}) is first  # an equal status: the model read before
    changed = JobStatus.read({**STORED, "attempt": 2})
    assert changed is not first
    assert changed.attempt == 2


@pytest.mark.parametrize("times", [1, 2])
def test_an_invalid_status_fails_every_read(times: int) -> None:
    for _ in range(times):
        with pytest.raises(ValidationError, match="notAField"):
            JobStatus.read({**STORED, "notAField": 1})

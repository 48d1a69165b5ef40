"""RFC 3339 timestamps as the API server writes them (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from multigpu_operator.policy.kube.timestamps import parse_time, rfc3339

MOMENT = datetime(2026, 11, 22, 10, 0, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        pytest.param(MOMENT, "2026-11-22T10:00:05Z", id="utc"),
        pytest.param(
            MOMENT.astimezone(timezone(timedelta(hours=2))), "2026-11-22T10:00:05Z", id="as-utc"
        ),
        pytest.param(
            MOMENT.replace(microsecond=999_999), "2026-11-22T10:00:05Z", id="whole-seconds"
        ),
    ],
)
def test_rfc3339(moment: datetime, text: str) -> None:
    assert rfc3339(moment) == text


@pytest.mark.parametrize(
    ("value", "moment"),
    [
        pytest.param(None, None, id="none"),
        pytest.param("", None, id="empty"),
        pytest.param("2026-11-22T10:00:05Z", MOMENT, id="z"),
        pytest.param("2026-11-22T12:00:05+02:00", MOMENT, id="offset"),
        pytest.param(
            "2026-11-22T10:00:05.250000Z", MOMENT.replace(microsecond=250_000), id="micro"
        ),
    ],
)
def test_parse_time(value: Any, moment: datetime | None) -> None:
    assert parse_time(value) == moment

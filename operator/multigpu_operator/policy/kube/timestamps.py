"""RFC 3339 timestamps as the API server writes them (UTC, whole seconds), and the clock
the loops default to (the policies themselves are handed the time)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def rfc3339(moment: datetime) -> str:
    # Formatted by hand: strftime takes twice as long, and every pass formats the time.
    m = moment.astimezone(UTC)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}Z"


def parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def utc_now() -> datetime:
    """The time now, in UTC: the default clock of the controller and the leader election."""
    return datetime.now(UTC)

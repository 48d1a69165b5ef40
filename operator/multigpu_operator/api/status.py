"""The vocabulary of a MultiGPUJob's status: its phases and its condition types.

These are API: users, kubectl columns, dashboards and alert rules read them, so they live
with the rest of the API and every layer above imports them from here.
"""

from __future__ import annotations

import enum


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# Final: a job in one of these phases never changes phase again.
TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED})


class ConditionType(enum.StrEnum):
    """In the order a job's conditions are listed in its status."""

    CREATED = "Created"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

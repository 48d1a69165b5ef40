"""A job's conditions: one per type, changed only on transitions, each transition an Event.

Pure: built from the previous status, it records what a reconcile pass decides and hands
back the new list and the events to post.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ConditionType(enum.StrEnum):
    CREATED = "Created"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post on the job after the status write."""

    type: str  # Normal | Warning
    reason: str
    message: str


# Conditions whose True is bad news: their transitions are Warning events.
_WARNING_WHEN_TRUE = frozenset({ConditionType.FAILED, ConditionType.RESTARTING})
_ORDER = {str(c): i for i, c in enumerate(ConditionType)}


class Conditions:
    def __init__(self, previous: Mapping[str, Any], generation: int, now: str) -> None:
        self._by_type = {c["type"]: dict(c) for c in previous.get("conditions", [])}
        self._generation = generation
        self._now = now
        self.events: list[Event] = []

    def is_true(self, ctype: ConditionType) -> bool:
        return self._by_type.get(ctype, {}).get("status") == "True"

    def has(self, ctype: ConditionType) -> bool:
        return ctype in self._by_type

    def set(
        self,
        ctype: ConditionType,
        status: bool,
        reason: str,
        message: str,
        *,
        always_event: bool = False,
    ) -> None:
        """Record a condition; an Event is emitted when its status or reason changes (or
        every time, with always_event: each restart is news even while restarting).

        Use clear() for a condition that should only be shown once it has held (a job that
        never restarted has no Restarting condition at all).
        """
        old = self._by_type.get(ctype)
        value = "True" if status else "False"
        if old and old.get("status") == value and old.get("reason") == reason:
            old["message"], old["observedGeneration"] = message, self._generation
            if always_event:
                self.event("Warning" if ctype in _WARNING_WHEN_TRUE else "Normal", reason, message)
            return
        self._by_type[ctype] = {
            "type": str(ctype),
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": self._now,
            "observedGeneration": self._generation,
        }
        if status:
            kind = "Warning" if ctype in _WARNING_WHEN_TRUE else "Normal"
            self.events.append(Event(kind, reason, message))

    def clear(self, ctype: ConditionType, reason: str, message: str) -> None:
        """Set to False if present (without an event): the state it described has passed."""
        old = self._by_type.get(ctype)
        if old is not None and old.get("status") == "True":
            self.set(ctype, False, reason, message)

    def event(self, type_: str, reason: str, message: str) -> None:
        """An Event for something that is not a condition change (a scale, a cleanup)."""
        self.events.append(Event(type_, reason, message))

    def as_list(self) -> list[dict[str, Any]]:
        return sorted(self._by_type.values(), key=lambda c: _ORDER.get(c["type"], len(_ORDER)))

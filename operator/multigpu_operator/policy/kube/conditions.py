"""A job's conditions: one per type, changed only on transitions, each transition an Event.

Steps describe what they want as ConditionChange values (`condition`, `cleared`) and
Events; decide() applies them, in the order the steps made them, to a Conditions built
from the previous status (typed, keyed by type), which hands back the new list and the
events to post.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from multigpu_operator.api.status import Condition, ConditionType, JobStatus


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post on the job after the status write."""

    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class ConditionChange:
    type: ConditionType
    status: bool
    reason: str
    message: str
    # An Event even when nothing changes: each restart is news even while restarting.
    always_event: bool = False
    # Only a condition that is True now is changed: the state it described has passed.
    # A condition that never held is not shown (a job that never restarted has no
    # Restarting condition at all).
    only_if_true: bool = False


def condition(
    ctype: ConditionType, status: bool, reason: str, message: str, *, always_event: bool = False
) -> ConditionChange:
    """Record a condition; an Event is emitted when it turns True or its reason changes
    (or every time, with always_event)."""
    return ConditionChange(ctype, status, reason, message, always_event=always_event)


def cleared(ctype: ConditionType, reason: str, message: str) -> ConditionChange:
    """Set to False if it is True now (without an event)."""
    return ConditionChange(ctype, False, reason, message, only_if_true=True)


# Conditions whose True is bad news: their transitions are Warning events.
_WARNING_WHEN_TRUE = frozenset(
    {ConditionType.FAILED, ConditionType.RESTARTING, ConditionType.STALLED}
)
_ORDER = {str(c): i for i, c in enumerate(ConditionType)}


class Conditions:
    """The conditions of `previous`, one per type, as changes leave them."""

    def __init__(self, previous: JobStatus, generation: int, now: datetime) -> None:
        self._by_type: dict[str, Condition] = {c.type: c for c in previous.conditions or ()}
        self._generation = generation
        self._now = now.astimezone(UTC).replace(microsecond=0)  # as the API server writes it
        self.events: list[Event] = []

    def apply(self, changes: Iterable[ConditionChange | Event]) -> None:
        """Condition changes and events, in the order they were decided."""
        for change in changes:
            if isinstance(change, Event):
                self.events.append(change)
                continue
            old = self._by_type.get(change.type)
            if not change.only_if_true or (old is not None and old.holds):
                self._set(change)

    def _set(self, change: ConditionChange) -> None:
        old = self._by_type.get(change.type)
        value = "True" if change.status else "False"
        kind = "Warning" if change.type in _WARNING_WHEN_TRUE else "Normal"
        if old and old.status == value and old.reason == change.reason:
            self._by_type[change.type] = old.model_copy(
                update={"message": change.message, "observed_generation": self._generation}
            )
            if change.always_event:
                self.events.append(Event(kind, change.reason, change.message))
            return
        self._by_type[change.type] = Condition(
            type=str(change.type),
            status=value,
            reason=change.reason,
            message=change.message,
            last_transition_time=self._now,
            observed_generation=self._generation,
        )
        if change.status:
            self.events.append(Event(kind, change.reason, change.message))

    def as_list(self) -> list[Condition]:
        return sorted(self._by_type.values(), key=lambda c: _ORDER.get(c.type, len(_ORDER)))

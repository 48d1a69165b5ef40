"""The one error the planner raises, with every conflict it found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldConflict:
    """One field of the job that the operator cannot plan around (not the API server's
    409, cluster/errors.py `Conflict`); `field` names what to change, as a path in the
    MultiGPUJob, e.g. ``spec.template.spec.containers[trainer].env[WORLD_SIZE]``."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class PlanError(ValueError):
    """The job cannot be turned into child objects. It carries every conflict found, so
    a user fixes them all at once, not one per retry; its text lists them ("; "), ready
    for the job's status and events."""

    def __init__(self, field: str, message: str, *more: FieldConflict) -> None:
        self.conflicts = (FieldConflict(field, message), *more)
        super().__init__("; ".join(str(c) for c in self.conflicts))
        # The first conflict, for callers that show one.
        self.field = field
        self.message = message

    @classmethod
    def of(cls, conflicts: Sequence[FieldConflict]) -> PlanError:
        first, *more = conflicts
        return cls(first.field, first.message, *more)


class FieldConflicts:
    """What building a job's pods found wrong, collected instead of raised at the first.
    One conflict per field: the same field of every pod is one conflict."""

    def __init__(self) -> None:
        self._found: dict[str, str] = {}

    def add(self, field: str, message: str) -> None:
        self._found.setdefault(field, message)

    def error(self) -> PlanError:
        return PlanError.of([FieldConflict(f, m) for f, m in self._found.items()])

    def raise_any(self) -> None:
        if self._found:
            raise self.error()

"""The shapes of a reconcile pass (pure): what a step sees, the counters it may move, the
outcome it returns, and what the whole pass decides.

decide() (reconcile.py) runs the steps in order. Each gets the same read-only snapshot of
the job (Observed) and the counters as the steps before it left them (Progress), and
returns an Outcome; decide() merges the outcomes in order and stops at the first that
ends the pass. No step changes anything another step holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.api.status import ConditionType, Phase
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.conditions import ConditionChange, Event
from multigpu_operator.policy.pods import attempt_of, being_deleted
from multigpu_operator.policy.timestamps import parse_time

Pod = Mapping[str, Any]


@dataclass(frozen=True)
class Observed:
    """One job as this pass sees it: never changed by a step."""

    job: Job
    desired: DesiredState
    pods: tuple[Pod, ...]  # the job's pods as the cache has them, being deleted or not
    previous: Mapping[str, Any]  # the status written before this pass
    now: datetime

    @cached_property
    def live(self) -> tuple[Pod, ...]:
        """Pods not being deleted."""
        return tuple(p for p in self.pods if not being_deleted(p))

    @property
    def elastic(self) -> bool:
        return self.job.spec.mode is Mode.ELASTIC

    @cached_property
    def previous_phase(self) -> Phase | None:
        phase = self.previous.get("phase")
        return Phase(phase) if phase else None

    def had_condition(self, ctype: ConditionType) -> bool:
        """Whether the previous status has this condition, True or False."""
        return any(c["type"] == ctype for c in self.previous.get("conditions", []))

    def current(self, attempt: int) -> list[Pod]:
        """Live pods of `attempt`. Elastic: every live pod up to it is a member; pods of a
        newer attempt (seen through a stale status) are never touched."""
        if self.elastic:
            return [p for p in self.live if attempt_of(p) <= attempt]
        return [p for p in self.live if attempt_of(p) == attempt]


@dataclass(frozen=True)
class Progress:
    """The counters that steps move and later steps read."""

    attempt: int
    restarts: int
    start: datetime  # when runPolicy.activeDeadlineSeconds started counting

    @classmethod
    def from_status(cls, previous: Mapping[str, Any], now: datetime) -> Progress:
        return cls(
            attempt=int(previous.get("attempt", 1)),
            restarts=int(previous.get("restarts", 0)),
            start=parse_time(previous.get("startTime")) or now,
        )


@dataclass(frozen=True)
class Outcome:
    """What one step decided; every field is optional."""

    status: Mapping[str, Any] = field(default_factory=dict)  # status fields to set
    # Condition changes and events, in the order decided.
    changes: tuple[ConditionChange | Event, ...] = ()
    delete_pods: tuple[str, ...] = ()
    create_pods: tuple[dict[str, Any], ...] = ()
    wake_after: tuple[float, ...] = ()  # seconds until a timer of this step is due
    delete_job: bool = False
    progress: Progress | None = None  # the counters, if this step moved them
    stop: Phase | None = None  # the pass ends here, in this phase

    def then(self, later: Outcome) -> Outcome:
        """This outcome followed by a later step's."""
        return Outcome(
            status={**self.status, **later.status},
            changes=self.changes + later.changes,
            delete_pods=self.delete_pods + later.delete_pods,
            create_pods=self.create_pods + later.create_pods,
            wake_after=self.wake_after + later.wake_after,
            delete_job=self.delete_job or later.delete_job,
            progress=self.progress if later.progress is None else later.progress,
            stop=self.stop if later.stop is None else later.stop,
        )


@dataclass(frozen=True)
class Decision:
    """What one pass (reconcile.decide) decides and the controller carries out: the status
    to write, then the pods to delete and create, and when to look again."""

    status: dict[str, Any]
    events: tuple[Event, ...]  # posted once the status is written
    entered: Phase | None  # the phase the job entered in this pass, if it changed
    create_pods: tuple[dict[str, Any], ...] = ()
    delete_pods: tuple[str, ...] = ()
    delete_job: bool = False
    requeue_after: float | None = None  # seconds until a timer (deadline, gang, TTL) is due
    restarts: int = 0  # restarts decided in this pass


@dataclass(frozen=True)
class StatusUpdate:
    """A status to write outside a pass (policy/fail.py's invalid_job)."""

    status: dict[str, Any]
    events: tuple[Event, ...]
    entered: Phase | None  # the phase the job entered with this update, if it changed

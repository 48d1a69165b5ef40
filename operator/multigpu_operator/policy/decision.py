"""What a reconcile pass decides and the controller carries out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.status import Phase
from multigpu_operator.policy.conditions import Event


@dataclass(frozen=True)
class StatusUpdate:
    status: dict[str, Any]
    events: tuple[Event, ...]  # posted once the status is written
    # The phase the job entered with this update, if it changed.
    entered: Phase | None


@dataclass(frozen=True)
class Decision:
    """One reconcile pass (reconcile.decide): the status to write, then the pods to
    delete and create, and when to look again."""

    status: dict[str, Any]
    events: tuple[Event, ...]
    entered: Phase | None  # the phase the job entered in this pass, if it changed
    create_pods: tuple[dict[str, Any], ...] = ()
    delete_pods: tuple[str, ...] = ()
    delete_job: bool = False
    requeue_after: float | None = None  # seconds until a timer (deadline, gang, TTL) is due
    restarts: int = 0  # restarts decided in this pass

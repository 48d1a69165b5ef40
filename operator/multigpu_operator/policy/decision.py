"""What one reconcile pass decides (reconcile.decide) and the controller carries out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from multigpu_operator.policy.conditions import Event
from multigpu_operator.policy.status import Phase


@dataclass(frozen=True)
class Decision:
    status: dict[str, Any]
    events: tuple[Event, ...]
    entered: Phase | None  # the phase the job entered in this pass, if it changed
    create_pods: tuple[dict[str, Any], ...] = ()
    delete_pods: tuple[str, ...] = ()
    delete_job: bool = False
    requeue_after: float | None = None  # seconds until a timer (deadline, gang, TTL) is due
    restarts: int = 0  # restarts decided in this pass

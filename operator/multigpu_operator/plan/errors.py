"""The one error the planner raises."""

from __future__ import annotations


class PlanError(ValueError):
    """The job cannot be turned into child objects; `field` names what to change.

    Fields are paths in the MultiGPUJob, e.g.
    ``spec.template.spec.containers[trainer].env[WORLD_SIZE]``, so the message can go
    straight into the job's status and events.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

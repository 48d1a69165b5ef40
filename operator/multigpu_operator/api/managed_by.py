"""spec.managedBy: which controller runs a job, as Kubernetes' Job and JobSet say it."""

from __future__ import annotations

# spec.managedBy of a job this operator runs (also what an unset spec.managedBy means).
OPERATOR_CONTROLLER = "multigpu.dev/operator"


def managed_by_us(managed_by: str | None) -> bool:
    """Whether this operator runs a job whose spec.managedBy is `managed_by`: unset or
    ours. JobSpec.managed_here reads the parsed spec, objects.managed_here the stored one."""
    return managed_by in (None, OPERATOR_CONTROLLER)

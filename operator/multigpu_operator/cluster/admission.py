"""Which field of a job a pod refusal is about, from the API server's own words.

Admission plugins answer 403 with a sentence, not a field path ('pods "x" is forbidden:
no PriorityClass with name y was found'). The job's condition names the field to fix
beside that sentence; the phrases below are those of the upstream plugins
(tests/integration/test_operator_answers.py checks them against a real API server).
"""

from __future__ import annotations

TEMPLATE_SPEC = "spec.template.spec"
RESOURCES = f"{TEMPLATE_SPEC}.containers[].resources"

# (a phrase of the refusal, the field it is about), first match wins: the overhead
# message also mentions the RuntimeClass, the preemption policy's the PriorityClass.
_PHRASES: tuple[tuple[str, str], ...] = (
    ("Pod Overhead", f"{TEMPLATE_SPEC}.overhead"),
    ("PreemptionPolicy", f"{TEMPLATE_SPEC}.preemptionPolicy"),
    ("PriorityClass", f"{TEMPLATE_SPEC}.priorityClassName"),
    ("RuntimeClass", f"{TEMPLATE_SPEC}.runtimeClassName"),
    ("service account", f"{TEMPLATE_SPEC}.serviceAccountName"),
    ("exceeded quota", RESOURCES),  # ResourceQuota: requests and limits, or the pod count
    ("usage per Container", RESOURCES),  # LimitRange
    ("usage per Pod", RESOURCES),
    ("PodSecurity", TEMPLATE_SPEC),  # Pod Security admission lists the container fields
)


def refused_field(message: str) -> str:
    """The field of the job that a refused pod's `message` is about; the template when
    the message names none we know."""
    return next((field for phrase, field in _PHRASES if phrase in message), "spec.template")

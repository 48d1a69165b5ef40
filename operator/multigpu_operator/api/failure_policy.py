"""spec.runPolicy.failurePolicy: rules that decide what a failure does to the job, as
JobSet's failure policy and the Job API's podFailurePolicy do, applied to the whole gang.

The rules are tried in order and the first that matches a failure decides it; a failure
no rule matches is decided by the default rules (spec.runPolicy's restartPolicy,
backoffLimit and infrastructureRetries), so a job without rules behaves as it always did.
policy/failures/rules.py applies them; CEL (api/rules.py) refuses rules that are empty
or contradict themselves.
"""

from __future__ import annotations

import enum
from typing import Annotated

from pydantic import Field

from multigpu_operator.api.base import ApiModel, Int32
from multigpu_operator.api.limits import (
    MAX_FAILURE_RULES,
    MAX_MATCH_VALUES,
    MAX_RETRIES,
)

ExitCode = Annotated[Int32, Field(ge=1, le=255)]
# A CamelCase reason, or a condition type (a readiness gate's may be domain-prefixed).
Word = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z][A-Za-z0-9_./-]*$")]


class FailureAction(enum.StrEnum):
    FAIL_JOB = "FailJob"  # the job fails at once, naming the rule
    RESTART_JOB = "RestartJob"  # a new attempt, counted against backoffLimit
    RESTART_JOB_NOT_COUNTED = "RestartJobNotCounted"  # a new attempt, not counted
    IGNORE = "Ignore"  # Elastic: the pod is replaced, counted nowhere


class Fault(enum.StrEnum):
    """What ended a pod from outside it: the infrastructure, not the training code
    (policy/failures/faults.py tells them apart)."""

    NODE_LOST = "NodeLost"  # its node became unreachable or not ready, or was removed
    EVICTED = "Evicted"  # evicted by the kubelet (node pressure) or the Eviction API (drain)
    PREEMPTED = "Preempted"  # preempted for a pod of higher priority
    NODE_SHUTDOWN = "NodeShutdown"  # its node shut down
    GPU_UNHEALTHY = "GPUUnhealthy"  # a GPU it was given was reported unhealthy
    # Reserved for the stall watchdog: the job's ranks made no progress.
    STALLED = "Stalled"


# The faults the default rules restart from without counting (not Stalled: that is
# decided by the stall policy).
INFRASTRUCTURE_FAULTS = (
    Fault.NODE_LOST,
    Fault.EVICTED,
    Fault.PREEMPTED,
    Fault.NODE_SHUTDOWN,
    Fault.GPU_UNHEALTHY,
)


class ExitCodeOperator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"


class ExitCodes(ApiModel):
    """Matches a failed container's exit code (the trainer's, or the first container
    that exited non-zero)."""

    operator: ExitCodeOperator = Field(
        description="In: the exit code is one of values. NotIn: it is none of them."
    )
    values: tuple[ExitCode, ...] = Field(
        min_length=1,
        max_length=MAX_MATCH_VALUES,
        description="Exit codes, 1 to 255 (137: killed by SIGKILL, e.g. OOM-killed).",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )

    def matches(self, exit_code: int | None) -> bool:
        """A pod without an exit code (lost, evicted) matches neither In nor NotIn."""
        if exit_code is None:
            return False
        return (exit_code in self.values) == (self.operator is ExitCodeOperator.IN)


class FailureRule(ApiModel):
    """A rule matches a failed pod when every criterion it sets matches (within a list,
    any value does); the first matching rule decides."""

    name: str | None = Field(
        None,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="A name for the rule, shown in the status when it fires.",
    )
    action: FailureAction = Field(
        description=(
            "FailJob: the job fails at once. RestartJob: a new attempt, counted against "
            "backoffLimit (and maxRestarts if set). RestartJobNotCounted: a new attempt "
            "not counted against backoffLimit, up to maxRestarts if set, else up to "
            "infrastructureRetries. Ignore (Elastic only): the failed pod is replaced "
            "and counted nowhere. An Elastic job never starts a whole new attempt: a "
            "restart replaces the failed pod."
        )
    )
    on_exit_codes: ExitCodes | None = Field(None, description="Match on the exit code.")
    on_reasons: tuple[Word, ...] | None = Field(
        None,
        min_length=1,
        max_length=MAX_MATCH_VALUES,
        description=(
            "Match on a container's termination reason, or the pod's status.reason "
            "(e.g. OOMKilled, Error, Evicted, SetupError)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    on_pod_conditions: tuple[Word, ...] | None = Field(
        None,
        min_length=1,
        max_length=MAX_MATCH_VALUES,
        description=(
            "Match on a condition type that is True on the pod (e.g. DisruptionTarget, "
            "which Kubernetes sets on a pod evicted, preempted or lost with its node)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    on_faults: tuple[Fault, ...] | None = Field(
        None,
        min_length=1,
        max_length=len(Fault),
        description=(
            "Match on an infrastructure fault: NodeLost, Evicted, Preempted, NodeShutdown, "
            "GPUUnhealthy, or Stalled (the ranks made no progress). May not be combined "
            "with onExitCodes or onReasons."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    max_restarts: Int32 | None = Field(
        None,
        ge=0,
        le=MAX_RETRIES,
        description=(
            "With RestartJob or RestartJobNotCounted: how many restarts this rule may "
            "decide; then the job fails naming the rule."
        ),
    )


class FailurePolicy(ApiModel):
    """Rules tried in order before the default rules (restartPolicy, backoffLimit,
    infrastructureRetries); the first that matches a failure decides it."""

    rules: tuple[FailureRule, ...] = Field(
        min_length=1,
        max_length=MAX_FAILURE_RULES,
        description="The rules, first match wins.",
    )

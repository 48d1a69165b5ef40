"""The status of a MultiGPUJob: its vocabulary (phases, condition types) and its schema.

Phases and condition types are API: users, kubectl columns, dashboards and alert rules read
them, so every layer above imports them from here. `JobStatus` is both the CRD's status
schema (what `kubectl explain` shows) and what a reconcile pass produces (policy/steps/status.py
builds it); a field it does not declare is an error, in the operator and, with strict
field validation, at the API server.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from multigpu_operator.api.base import Int32, Int64, Nullable, StatusModel, read_cached
from multigpu_operator.api.limits import (
    MAX_ATTEMPTS_KEPT,
    MAX_AVOIDED_NODES,
    MAX_FAILED_PODS_KEPT,
    MAX_FAILURE_RULES,
)
from multigpu_operator.api.placement import PlacementStatus
from multigpu_operator.api.progress import JobProgress
from multigpu_operator.api.runtime_ref import RuntimeSnapshot


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


# Final: a job in one of these phases never changes phase again.
TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED})


class ConditionType(enum.StrEnum):
    """In the order a job's conditions are listed in its status."""

    CREATED = "Created"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    STALLED = "Stalled"  # the step stood still past spec.runPolicy.stall
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


Count = Annotated[Int32, Field(ge=0)]
Generation = Annotated[Int64, Field(ge=0)]


class Condition(StatusModel):
    type: str = Field(description=f"Condition type: {', '.join(ConditionType)}.")
    status: Literal["True", "False", "Unknown"] = Field(description="Whether the condition holds.")
    reason: str | None = Field(
        None, description="Machine-readable CamelCase reason for the last transition."
    )
    message: str | None = Field(None, description="Human-readable details.")
    last_transition_time: datetime | None = Field(None, description="When status last changed.")
    observed_generation: Generation | None = Field(
        None, description="metadata.generation the condition was set for."
    )

    @property
    def holds(self) -> bool:
        """Whether the condition is True."""
        return self.status == "True"


class PodCounts(StatusModel):
    """Pods of the job by phase."""

    pending: Count | None = Field(None, description="Pods not yet running.")
    running: Count | None = Field(None, description="Pods running.")
    succeeded: Count | None = Field(None, description="Pods that exited 0.")
    failed: Count | None = Field(None, description="Pods that failed.")


class FailedPod(StatusModel):
    """A pod whose failure ended an attempt, or that was replaced."""

    pod: str | None = Field(None, description="The failed pod.")
    replica_index: Annotated[int | None, Nullable] = Field(None, description="Its replica index.")
    node: str | None = Field(None, description="The node it ran on, where known.")
    exit_code: Annotated[int | None, Nullable] = Field(
        None, description="The trainer's exit code; null if the pod was lost."
    )
    reason: str | None = Field(None, description="Why it ended.")


class LastFailure(FailedPod):
    """The most recent pod failure the operator acted on."""

    attempt: Count | None = Field(None, description="The attempt it belonged to.")
    fault: str | None = Field(
        None,
        description=(
            "The infrastructure fault that ended it (NodeLost, Evicted, Preempted, "
            "NodeShutdown, GPUUnhealthy), or Stalled (no progress); absent for a failure "
            "of the pod itself."
        ),
    )
    device: str | None = Field(None, description="The unhealthy device, where known.")
    rule: str | None = Field(
        None,
        description=(
            "The rule that decided it: spec.runPolicy.failurePolicy.rules[i] (with the "
            "rule's name), or the default rule's field (restartPolicy, backoffLimit, "
            "infrastructureRetries)."
        ),
    )


class RuleRestarts(StatusModel):
    """Restarts decided by a failure-policy rule with maxRestarts."""

    index: Count = Field(description="The rule's index in spec.runPolicy.failurePolicy.rules.")
    restarts: Count = Field(description="Restarts it decided.")


class Attempt(StatusModel):
    """One attempt: a run of every pod of the job (Elastic: its one run)."""

    attempt: Count = Field(description="The attempt's number, from 1.")
    start_time: datetime | None = Field(None, description="When its pods were first planned.")
    end_time: datetime | None = Field(None, description="When it ended; absent while it runs.")
    reason: str | None = Field(None, description="Why it ended.")
    rule: str | None = Field(None, description="The rule that decided what followed.")
    failed_pods: list[FailedPod] | None = Field(
        None,
        max_length=MAX_FAILED_PODS_KEPT,
        description=f"Its failed pods, the first to fail first (at most {MAX_FAILED_PODS_KEPT}).",
    )


class JobStatus(StatusModel):
    """Observed state of the job, written by the operator."""

    phase: Phase | None = Field(
        None,
        description=(
            "Pending until every pod runs (Elastic: minReplicas pods), then Running; "
            "Restarting from a retried failure until the new attempt runs; Suspended "
            "while spec.suspend is true; Succeeded when every pod succeeded (Elastic: "
            "training finished); Failed when the job cannot continue. Succeeded and "
            "Failed are final. docs/lifecycle.md has the rules."
        ),
    )
    reason: str | None = Field(
        None,
        description=(
            "A short CamelCase reason for the current phase, like a Pod's status.reason "
            "(e.g. ImagePullBackOff or NoNodeFits while Pending, the Failed condition's "
            "reason once Failed); the condition it comes from has the message. Absent "
            "when the phase needs no explaining (pods just created)."
        ),
    )
    conditions: list[Condition] | None = Field(
        None,
        description="Latest observations of the job's state, one per type.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    replicas: Count | None = Field(
        None, description="Pods that exist now (read by the scale subresource)."
    )
    selector: str | None = Field(
        None, description="Label selector of the job's pods (read by the scale subresource)."
    )
    world_size: Count | None = Field(
        None, description="Training processes in the current run (what WORLD_SIZE counts)."
    )
    pods: PodCounts | None = None
    attempt: Count | None = Field(
        None,
        description=(
            "Current attempt, from 1. A retry after a failure, a resume and a requeue "
            "after a gang timeout each start a new one; pods carry it as the label "
            "multigpu.dev/attempt."
        ),
    )
    restarts: Count | None = Field(
        None,
        description=(
            "Failures retried so far (new attempts, or Elastic pods replaced); at most "
            "runPolicy.backoffLimit."
        ),
    )
    last_failure: LastFailure | None = None
    progress: JobProgress | None = None
    infrastructure_restarts: Count | None = Field(
        None,
        description=(
            "New attempts (Elastic: pods replaced) after infrastructure faults and "
            "RestartJobNotCounted rules without maxRestarts; at most "
            "runPolicy.infrastructureRetries."
        ),
    )
    rule_restarts: list[RuleRestarts] | None = Field(
        None,
        max_length=MAX_FAILURE_RULES,
        description="Restarts decided by each failure-policy rule that has maxRestarts.",
    )
    avoided_nodes: list[str] | None = Field(
        None,
        max_length=MAX_AVOIDED_NODES,
        description=(
            "Nodes where an infrastructure fault ended a pod of the job: its later pods "
            "are kept off them (a required node anti-affinity), unless no other node "
            f"could ever fit them. The latest {MAX_AVOIDED_NODES}, kept for the job's life."
        ),
    )
    placement: PlacementStatus | None = None
    runtime: RuntimeSnapshot | None = None  # spec.runtimeRef's runtime, as the job started
    attempts: list[Attempt] | None = Field(
        None,
        max_length=MAX_ATTEMPTS_KEPT,
        description=f"The latest {MAX_ATTEMPTS_KEPT} attempts, oldest first.",
    )
    created_attempt: Count | None = Field(
        None, description="The last attempt all of whose pods were seen created."
    )
    target_replicas: Count | None = Field(
        None, description="Elastic: the pod count last planned (for scale events)."
    )
    counted_failures: list[str] | None = Field(
        None, description="Elastic: UIDs of failed pods already counted as restarts."
    )
    unscheduled_since: datetime | None = Field(
        None, description="Since when pods have been unschedulable (gang timer)."
    )
    cannot_start_since: datetime | None = Field(
        None,
        description=(
            "Since when a container of the job has been failing to start (image pull, "
            "missing ConfigMap or Secret key, creation errors): the startPolicy timer."
        ),
    )
    below_min_since: datetime | None = Field(
        None, description="Elastic: since when fewer than minReplicas pods run."
    )
    requeue_at: datetime | None = Field(
        None, description="After a gang timeout with Requeue: when pods are created again."
    )
    start_time: datetime | None = Field(
        None,
        description=(
            "When the operator first acted on the job, or its last resume "
            "(activeDeadlineSeconds counts from here)."
        ),
    )
    completion_time: datetime | None = Field(
        None, description="When the job reached Succeeded or Failed."
    )
    observed_generation: Generation | None = Field(
        None, description="metadata.generation this status reflects."
    )

    @classmethod
    def read(cls, stored: Mapping[str, Any]) -> JobStatus:
        """A status as the API server stores it (camelCase JSON). Every pass reads its
        job's previous status, which changes far less often than passes run: a status
        read before is not validated again (statuses are never changed in place)."""
        return read_cached(cls, stored)

    def condition(self, ctype: str) -> Condition | None:
        """The condition of type `ctype`, if the status has one (one per type)."""
        for cond in self.conditions or ():
            if cond.type == ctype:
                return cond
        return None

    def without(self, *fields: str) -> JobStatus:
        """This status with `fields` (their Python names) unset: absent, not null."""
        kept = self.model_fields_set.difference(fields)
        if kept == self.model_fields_set:
            return self
        return JobStatus.model_construct(kept, **{f: getattr(self, f) for f in kept})

    def as_api(self) -> dict[str, Any]:
        """The status as the API's JSON: the fields set, camelCase. The actuator's status
        write (actuator/status.py) is where a pass's status becomes JSON."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def merged(self, later: JobStatus) -> JobStatus:
        """This status with the fields `later` sets replaced."""
        # Most steps set nothing: no copy then (a pass merges a dozen outcomes).
        if not later.model_fields_set:
            return self
        if not self.model_fields_set:
            return later
        return self.model_copy(update={f: getattr(later, f) for f in later.model_fields_set})

"""A job's lifecycle policies: restarts, deadlines and cleanup (runPolicy), gang start,
elastic scaling.

Declared once as typed models (api/base.py): the CRD schema, offline validation and
defaulting, and the typed job the reconciler reads all come from these fields.
"""

from __future__ import annotations

import enum

from pydantic import Field

from multigpu_operator.api.base import ApiModel, Int32, Int64
from multigpu_operator.api.failure_policy import ExitCode, FailurePolicy
from multigpu_operator.api.limits import (
    DEFAULT_INFRASTRUCTURE_RETRIES,
    MAX_JOB_SECONDS,
    MAX_REPLICAS,
    MAX_RETRIES,
    MAX_WAIT_SECONDS,
)
from multigpu_operator.api.stall import StallPolicy


class RestartPolicy(enum.StrEnum):
    # Every failure is retried until backoffLimit is used up.
    ON_FAILURE = "OnFailure"
    # The first failure fails the job.
    NEVER = "Never"
    # Only retryable exit codes (128 and above: killed by a signal, e.g. OOM-killed or
    # preempted; plus spec.runPolicy.retryableExitCodes) are retried; others fail at once.
    EXIT_CODE = "ExitCode"


class CleanPodPolicy(enum.StrEnum):
    ALL = "All"  # delete every pod once the job has finished
    RUNNING = "Running"  # delete pods still pending or running; keep finished ones for logs
    NONE = "None"  # leave every pod as it is


class GangTimeoutAction(enum.StrEnum):
    WAIT = "Wait"  # keep the pods and keep waiting, with a condition saying why
    FAIL = "Fail"  # fail the job
    REQUEUE = "Requeue"  # delete the pods (freeing what they hold) and try again later


class BelowMinAction(enum.StrEnum):
    FAIL = "Fail"
    WAIT = "Wait"


# Exit codes from this one up mean "killed by a signal" (128 + signal number).
SIGNAL_EXIT_CODES_FROM = 128


class RunPolicy(ApiModel):
    """What happens when a pod fails, how long the job may run, and what is left
    behind when it ends. For DistributedDataParallel, DataParallel and ModelParallel
    a failed pod breaks the process group, so a retry replaces every pod (a new
    attempt); for Elastic only the failed pod is replaced and torchrun re-forms the
    group."""

    restart_policy: RestartPolicy = Field(
        RestartPolicy.ON_FAILURE,
        description=(
            "Which failures are retried. OnFailure: every failure, until backoffLimit is "
            "used up. Never: the first failure fails the job. ExitCode: only exit codes "
            f"from {SIGNAL_EXIT_CODES_FROM} up (killed by a signal: OOM-killed, "
            "preempted) and those in retryableExitCodes; any other exit code fails the "
            "job at once. A pod lost with its node, evicted, preempted, shut down with its "
            "node or given an unhealthy GPU is an infrastructure fault: retried unless "
            "Never, counted against infrastructureRetries, not backoffLimit."
        ),
    )
    backoff_limit: Int32 = Field(
        3,
        ge=0,
        le=MAX_RETRIES,
        description=(
            "Retries allowed: the job makes at most backoffLimit + 1 attempts (Elastic: "
            "replaces failed pods at most backoffLimit times) and then fails with the last "
            "failure in its message."
        ),
    )
    retryable_exit_codes: tuple[ExitCode, ...] = Field(
        (),
        description=(
            f"With restartPolicy ExitCode: exit codes below {SIGNAL_EXIT_CODES_FROM} that "
            "are retried too (e.g. your script's 'try again' code)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    infrastructure_retries: Int32 = Field(
        DEFAULT_INFRASTRUCTURE_RETRIES,
        ge=0,
        le=MAX_RETRIES,
        description=(
            "New attempts allowed after infrastructure faults (a node lost, an eviction, a "
            "preemption, a node shutdown, an unhealthy GPU), not counted against "
            "backoffLimit; then the job fails with reason InfrastructureRetriesExceeded. "
            "The next attempt avoids the nodes that failed (status.avoidedNodes)."
        ),
    )
    failure_policy: FailurePolicy | None = Field(
        None,
        description=(
            "Rules by exit code, termination reason, pod condition or fault, tried before "
            "restartPolicy, backoffLimit and infrastructureRetries, which decide what no "
            "rule matches."
        ),
    )
    active_deadline_seconds: Int64 | None = Field(
        None,
        ge=1,
        le=MAX_JOB_SECONDS,
        description=(
            "Seconds the job may run, counted from its start (or its last resume); then it "
            "fails with reason DeadlineExceeded and its running pods are stopped. Unset: "
            "no limit; set, up to 366 days."
        ),
    )
    ttl_seconds_after_finished: Int64 | None = Field(
        None,
        ge=0,
        le=MAX_JOB_SECONDS,
        description=(
            "Seconds after the job Succeeded or Failed when the operator deletes it (and, "
            "through garbage collection, its pods and Service). Unset: kept; set, up to 366 "
            "days."
        ),
    )
    stall: StallPolicy | None = Field(
        None,
        description=(
            "The stall watchdog: how long the training step may stand still, and what "
            "happens then (condition Stalled). Unset: automatic, once the job reports "
            "progress."
        ),
    )
    clean_pod_policy: CleanPodPolicy = Field(
        CleanPodPolicy.RUNNING,
        description=(
            "Which pods are deleted once the job has finished. All: every pod. Running: "
            "pods still pending or running (finished pods stay, with their logs). None: "
            "none, running ones keep running."
        ),
    )

    def retries(self, exit_code: int | None) -> bool:
        """Whether a failure with this exit code (None: no exit code, e.g. the pod was
        evicted or its node lost) may be retried under the restart policy."""
        if self.restart_policy is RestartPolicy.NEVER:
            return False
        if self.restart_policy is RestartPolicy.ON_FAILURE or exit_code is None:
            return True
        return exit_code >= SIGNAL_EXIT_CODES_FROM or exit_code in self.retryable_exit_codes


class GangPolicy(ApiModel):
    """Gang start: a job's pods are created together and must all be scheduled (for
    Elastic: at least minReplicas) within timeoutSeconds, so a job never holds part
    of the GPUs it needs forever. Pods held by a scheduling gate (e.g. Kueue's
    admission) are queued, not late: the timer starts once no gate holds them. For
    all-or-nothing placement use a gang-aware scheduler through
    template.spec.schedulerName (see docs/lifecycle.md)."""

    timeout_seconds: Int32 = Field(
        300,
        ge=1,
        le=MAX_WAIT_SECONDS,
        description=(
            "How long the pods may stay unscheduled before onTimeout applies: up to a week; "
            "onTimeout Wait waits forever."
        ),
    )
    on_timeout: GangTimeoutAction = Field(
        GangTimeoutAction.REQUEUE,
        description=(
            "Wait: keep the pods and keep waiting (condition Scheduled says why). Fail: "
            "the job fails with reason GangTimeout. Requeue: the pods are deleted, "
            "freeing what they hold, and created again after requeueAfterSeconds (not "
            "counted as a restart). A job that no node of the cluster can ever fit "
            "(condition Scheduled, reason NoNodeFits) is not requeued: it fails with "
            "NoNodeFits, unless onTimeout is Wait."
        ),
    )
    requeue_after_seconds: Int32 = Field(
        60,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=(
            "With onTimeout Requeue: how long the job waits without pods before trying "
            "again (up to a week)."
        ),
    )


class ElasticPolicy(ApiModel):
    """Elastic training policy; required when mode is Elastic and not allowed otherwise.
    Pods run torchrun with c10d rendezvous (PET_NNODES=minReplicas:maxReplicas) on
    masterPort, so the job keeps training while pods come and go between minReplicas
    and maxReplicas. The current pod count is spec.replicas, changed with the scale
    subresource (`kubectl scale mgj/<name> --replicas=N`, or a
    HorizontalPodAutoscaler) and always kept within [minReplicas, maxReplicas]."""

    min_replicas: Int32 = Field(
        ge=1,
        le=MAX_REPLICAS,
        description=(
            "Fewest pods the job trains with; rendezvous waits for at least this many "
            "(torchrun --nnodes min). Must not exceed maxReplicas."
        ),
    )
    max_replicas: Int32 = Field(
        ge=1,
        le=MAX_REPLICAS,
        description=(
            "Most pods the job may scale to (torchrun --nnodes max). spec.replicas may not "
            "exceed it."
        ),
    )
    max_restarts: Int32 = Field(
        3,
        ge=0,
        le=MAX_RETRIES,
        description=(
            "How many times torchrun restarts the worker group after a failure or a "
            "membership change that loses a pod (torchrun --max-restarts); a pod joining "
            "does not count."
        ),
    )
    below_min_timeout_seconds: Int32 = Field(
        300,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=(
            "How long the job may run with fewer than minReplicas pods running (a node "
            "lost, a pod replaced) before onBelowMin applies: up to a week; onBelowMin "
            "Wait waits forever."
        ),
    )
    on_below_min: BelowMinAction = Field(
        BelowMinAction.FAIL,
        description=(
            "What happens after belowMinTimeoutSeconds with fewer than minReplicas pods "
            "running. Fail: the job fails (reason BelowMinReplicas). Wait: it keeps "
            "waiting for capacity, with a condition saying how many pods are missing."
        ),
    )

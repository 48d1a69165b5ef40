"""OpenAPI v3 schemas of a job's policies: elastic scaling, restarts and deadlines
(runPolicy), gang start, suspend. Defaults come from api/spec.py and api/lifecycle.py."""

from __future__ import annotations

from multigpu_operator.api.lifecycle import (
    DEFAULT_BACKOFF_LIMIT,
    DEFAULT_BELOW_MIN_ACTION,
    DEFAULT_BELOW_MIN_TIMEOUT_SECONDS,
    DEFAULT_CLEAN_POD_POLICY,
    DEFAULT_GANG_TIMEOUT_ACTION,
    DEFAULT_GANG_TIMEOUT_SECONDS,
    DEFAULT_REQUEUE_AFTER_SECONDS,
    DEFAULT_RESTART_POLICY,
    SIGNAL_EXIT_CODES_FROM,
    BelowMinAction,
    CleanPodPolicy,
    GangTimeoutAction,
    RestartPolicy,
)
from multigpu_operator.api.schema_types import Schema, enum_of, integer
from multigpu_operator.api.spec import DEFAULT_ELASTIC_MAX_RESTARTS


def elastic_schema() -> Schema:
    return {
        "type": "object",
        "description": (
            "Elastic training policy; required when mode is Elastic and not allowed otherwise. "
            "Pods run torchrun with c10d rendezvous (PET_NNODES=minReplicas:maxReplicas) on "
            "masterPort, so the job keeps training while pods come and go between minReplicas "
            "and maxReplicas. The current pod count is spec.replicas, changed with the scale "
            "subresource (`kubectl scale mgj/<name> --replicas=N`, or a "
            "HorizontalPodAutoscaler) and always kept within [minReplicas, maxReplicas]."
        ),
        "required": ["minReplicas", "maxReplicas"],
        "properties": {
            "minReplicas": integer(
                "Fewest pods the job trains with; rendezvous waits for at least this many "
                "(torchrun --nnodes min). Must not exceed maxReplicas.",
                1,
                format="int32",
            ),
            "maxReplicas": integer(
                "Most pods the job may scale to (torchrun --nnodes max). spec.replicas may not "
                "exceed it.",
                1,
                format="int32",
            ),
            "maxRestarts": integer(
                "How many times torchrun restarts the worker group after a failure or a "
                "membership change that loses a pod (torchrun --max-restarts); a pod joining "
                f"does not count. Default {DEFAULT_ELASTIC_MAX_RESTARTS}.",
                0,
                DEFAULT_ELASTIC_MAX_RESTARTS,
                format="int32",
            ),
            "belowMinTimeoutSeconds": integer(
                "How long the job may run with fewer than minReplicas pods running (a node "
                "lost, a pod replaced) before onBelowMin applies. Default "
                f"{DEFAULT_BELOW_MIN_TIMEOUT_SECONDS}.",
                0,
                DEFAULT_BELOW_MIN_TIMEOUT_SECONDS,
                format="int32",
            ),
            "onBelowMin": enum_of(
                "What happens after belowMinTimeoutSeconds with fewer than minReplicas pods "
                "running. Fail: the job fails (reason BelowMinReplicas). Wait: it keeps "
                "waiting for capacity, with a condition saying how many pods are missing. "
                f"Default {DEFAULT_BELOW_MIN_ACTION}.",
                [str(a) for a in BelowMinAction],
                str(DEFAULT_BELOW_MIN_ACTION),
            ),
        },
    }


def run_policy_schema() -> Schema:
    return {
        "type": "object",
        "description": (
            "What happens when a pod fails, how long the job may run, and what is left "
            "behind when it ends. For DistributedDataParallel, DataParallel and ModelParallel "
            "a failed pod breaks the process group, so a retry replaces every pod (a new "
            "attempt); for Elastic only the failed pod is replaced and torchrun re-forms the "
            "group."
        ),
        "default": {},
        "properties": {
            "restartPolicy": enum_of(
                "Which failures are retried. OnFailure: every failure, until backoffLimit is "
                "used up. Never: the first failure fails the job. ExitCode: only exit codes "
                f"from {SIGNAL_EXIT_CODES_FROM} up (killed by a signal: OOM-killed, "
                "preempted) and those in retryableExitCodes; any other exit code fails the "
                "job at once. A pod lost with its node or evicted has no exit code and is "
                f"retried unless Never. Default {DEFAULT_RESTART_POLICY}.",
                [str(p) for p in RestartPolicy],
                str(DEFAULT_RESTART_POLICY),
            ),
            "backoffLimit": integer(
                "Retries allowed: the job makes at most backoffLimit + 1 attempts (Elastic: "
                "replaces failed pods at most backoffLimit times) and then fails with the last "
                f"failure in its message. Default {DEFAULT_BACKOFF_LIMIT}.",
                0,
                DEFAULT_BACKOFF_LIMIT,
                format="int32",
            ),
            "retryableExitCodes": {
                "type": "array",
                "description": (
                    "With restartPolicy ExitCode: exit codes below "
                    f"{SIGNAL_EXIT_CODES_FROM} that are retried too (e.g. your script's "
                    "'try again' code)."
                ),
                "x-kubernetes-list-type": "set",
                "items": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 255},
            },
            "activeDeadlineSeconds": integer(
                "Seconds the job may run, counted from its start (or its last resume); then it "
                "fails with reason DeadlineExceeded and its running pods are stopped. Unset: "
                "no limit.",
                1,
                format="int64",
            ),
            "ttlSecondsAfterFinished": integer(
                "Seconds after the job Succeeded or Failed when the operator deletes it (and, "
                "through garbage collection, its pods and Service). Unset: kept.",
                0,
                format="int64",
            ),
            "cleanPodPolicy": enum_of(
                "Which pods are deleted once the job has finished. All: every pod. Running: "
                "pods still pending or running (finished pods stay, with their logs). None: "
                f"none, running ones keep running. Default {DEFAULT_CLEAN_POD_POLICY}.",
                [str(p) for p in CleanPodPolicy],
                str(DEFAULT_CLEAN_POD_POLICY),
            ),
        },
    }


def gang_schema() -> Schema:
    return {
        "type": "object",
        "description": (
            "Gang start: a job's pods are created together and must all be scheduled (for "
            "Elastic: at least minReplicas) within timeoutSeconds, so a job never holds part "
            "of the GPUs it needs forever. Pods held by a scheduling gate (e.g. Kueue's "
            "admission) are queued, not late: the timer starts once no gate holds them. For "
            "all-or-nothing placement use a gang-aware scheduler through "
            "template.spec.schedulerName (see docs/lifecycle.md)."
        ),
        "default": {},
        "properties": {
            "timeoutSeconds": integer(
                "How long the pods may stay unscheduled before onTimeout applies. Default "
                f"{DEFAULT_GANG_TIMEOUT_SECONDS}.",
                1,
                DEFAULT_GANG_TIMEOUT_SECONDS,
                format="int32",
            ),
            "onTimeout": enum_of(
                "Wait: keep the pods and keep waiting (condition Scheduled says why). Fail: "
                "the job fails with reason GangTimeout. Requeue: the pods are deleted, "
                "freeing what they hold, and created again after requeueAfterSeconds (not "
                f"counted as a restart). Default {DEFAULT_GANG_TIMEOUT_ACTION}.",
                [str(a) for a in GangTimeoutAction],
                str(DEFAULT_GANG_TIMEOUT_ACTION),
            ),
            "requeueAfterSeconds": integer(
                "With onTimeout Requeue: how long the job waits without pods before trying "
                f"again. Default {DEFAULT_REQUEUE_AFTER_SECONDS}.",
                0,
                DEFAULT_REQUEUE_AFTER_SECONDS,
                format="int32",
            ),
        },
    }


def suspend_schema() -> Schema:
    return {
        "type": "boolean",
        "default": False,
        "description": (
            "true deletes the job's pods and keeps the job (phase Suspended); false again "
            "starts a fresh attempt, which is not counted as a restart and restarts the "
            "activeDeadlineSeconds clock. Queueing systems such as Kueue admit jobs this way."
        ),
    }

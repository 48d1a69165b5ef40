"""Typed model of a job's lifecycle policies: restarts, deadlines, cleanup, gang start.

Like api/spec.py, defaults live here once; the CRD schema (api/schema_policies.py) reads
them and the API server applies them, and `from_dict` applies them again offline.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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


DEFAULT_RESTART_POLICY = RestartPolicy.ON_FAILURE
DEFAULT_BACKOFF_LIMIT = 3
DEFAULT_CLEAN_POD_POLICY = CleanPodPolicy.RUNNING
# Exit codes from this one up mean "killed by a signal" (128 + signal number).
SIGNAL_EXIT_CODES_FROM = 128
DEFAULT_GANG_TIMEOUT_SECONDS = 300
DEFAULT_GANG_TIMEOUT_ACTION = GangTimeoutAction.REQUEUE
DEFAULT_REQUEUE_AFTER_SECONDS = 60
DEFAULT_BELOW_MIN_TIMEOUT_SECONDS = 300
DEFAULT_BELOW_MIN_ACTION = BelowMinAction.FAIL


@dataclass(frozen=True)
class RunPolicy:
    restart_policy: RestartPolicy = DEFAULT_RESTART_POLICY
    # Retries allowed: a job makes at most backoff_limit + 1 attempts.
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT
    retryable_exit_codes: frozenset[int] = frozenset()
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    clean_pod_policy: CleanPodPolicy = DEFAULT_CLEAN_POD_POLICY

    def retries(self, exit_code: int | None) -> bool:
        """Whether a failure with this exit code (None: no exit code, e.g. the pod was
        evicted or its node lost) may be retried under the restart policy."""
        if self.restart_policy is RestartPolicy.NEVER:
            return False
        if self.restart_policy is RestartPolicy.ON_FAILURE or exit_code is None:
            return True
        return exit_code >= SIGNAL_EXIT_CODES_FROM or exit_code in self.retryable_exit_codes

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> RunPolicy:
        raw = raw or {}
        return cls(
            restart_policy=RestartPolicy(raw.get("restartPolicy", DEFAULT_RESTART_POLICY)),
            backoff_limit=int(raw.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)),
            retryable_exit_codes=frozenset(int(c) for c in raw.get("retryableExitCodes", [])),
            active_deadline_seconds=_optional_int(raw.get("activeDeadlineSeconds")),
            ttl_seconds_after_finished=_optional_int(raw.get("ttlSecondsAfterFinished")),
            clean_pod_policy=CleanPodPolicy(raw.get("cleanPodPolicy", DEFAULT_CLEAN_POD_POLICY)),
        )


@dataclass(frozen=True)
class GangPolicy:
    timeout_seconds: int = DEFAULT_GANG_TIMEOUT_SECONDS
    on_timeout: GangTimeoutAction = DEFAULT_GANG_TIMEOUT_ACTION
    requeue_after_seconds: int = DEFAULT_REQUEUE_AFTER_SECONDS

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> GangPolicy:
        raw = raw or {}
        return cls(
            timeout_seconds=int(raw.get("timeoutSeconds", DEFAULT_GANG_TIMEOUT_SECONDS)),
            on_timeout=GangTimeoutAction(raw.get("onTimeout", DEFAULT_GANG_TIMEOUT_ACTION)),
            requeue_after_seconds=int(
                raw.get("requeueAfterSeconds", DEFAULT_REQUEUE_AFTER_SECONDS)
            ),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)

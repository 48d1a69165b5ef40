"""Failures and restarts under spec.runPolicy (pure).

DistributedDataParallel, DataParallel, ModelParallel: one failed (or lost) replica
breaks the collective, so the attempt is over: the next attempt's number is written
first, then the old attempt's pods are deleted, and their names are reused once they
are gone. Elastic: only the failed pod is replaced; torchrun re-forms the group around
it. Every retried failure counts against backoffLimit, except an elastic pod disrupted
from outside (its node lost, an eviction).
"""

from __future__ import annotations

from dataclasses import replace

from multigpu_operator.api.lifecycle import RestartPolicy, RunPolicy
from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.conditions import cleared, condition
from multigpu_operator.policy.fail import fail
from multigpu_operator.policy.failures import (
    SETUP_ERROR,
    SETUP_ERROR_EXIT_CODE,
    Failure,
    failures,
    lost_pod,
)
from multigpu_operator.policy.pods import name_of
from multigpu_operator.policy.step import Observed, Outcome, Progress


def failures_and_restarts(seen: Observed, progress: Progress) -> Outcome:
    old = tuple(name_of(p) for p in seen.older(progress.attempt))
    replace_failed = elastic_failures if seen.elastic else attempt_failure
    return Outcome(delete_pods=old).then(replace_failed(seen, progress))


def attempt_failure(seen: Observed, progress: Progress) -> Outcome:
    """The first failed replica of the attempt (or one that disappeared after the attempt
    had all its pods) ends it: a new attempt, or the job fails."""
    current = seen.current(progress.attempt)
    found = failures(current)
    if not found and seen.previous.get("createdAttempt") == progress.attempt:
        present = {name_of(p) for p in current}
        found = [
            lost_pod(name_of(p), i)
            for i, p in enumerate(seen.desired.pods)
            if name_of(p) not in present
        ][:1]
    if not found:
        return Outcome()
    failure, policy = found[0], seen.job.spec.run_policy
    if not may_retry(policy, failure, progress.restarts):
        return give_up(policy, failure, progress)
    attempt = progress.attempt + 1
    msg = f"starting attempt {attempt} of {policy.backoff_limit + 1}: {failure.message()}"
    return Outcome(
        status=JobStatus(last_failure=failure.as_status(progress.attempt)),
        changes=(
            condition(ConditionType.RESTARTING, True, "PodFailed", msg, always_event=True),
            cleared(ConditionType.RUNNING, "Restarting", msg),
        ),
        delete_pods=tuple(name_of(p) for p in seen.older(attempt)),
        progress=replace(progress, attempt=attempt, restarts=progress.restarts + 1),
        stop=Phase.RESTARTING,
    )


def elastic_failures(seen: Observed, progress: Progress) -> Outcome:
    """Each failed pod is replaced alone and counted once (status.countedFailures holds
    the failed pods already counted while they are still seen)."""
    found = failures(seen.current(progress.attempt))
    counted = set(seen.previous.get("countedFailures", []))
    policy = seen.job.spec.run_policy
    limit = policy.backoff_limit
    decided = Outcome()
    for failure in found:
        if failure.uid in counted or failure.disrupted:
            continue  # a lost node or an eviction is replaced, not counted
        if not may_retry(policy, failure, progress.restarts):
            return decided.then(give_up(policy, failure, progress))
        progress = replace(progress, restarts=progress.restarts + 1)
        counted.add(failure.uid)
        msg = f"replacing {failure.message()} (restart {progress.restarts} of {limit})"
        decided = decided.then(
            Outcome(
                status=JobStatus(last_failure=failure.as_status(progress.attempt)),
                changes=(
                    condition(ConditionType.RESTARTING, True, "PodFailed", msg, always_event=True),
                ),
                progress=progress,
            )
        )
    if not found:
        return decided
    return decided.then(
        Outcome(
            status=JobStatus(counted_failures=sorted(f.uid for f in found if f.uid in counted)),
            delete_pods=tuple(f.pod for f in found),
        )
    )


def may_retry(policy: RunPolicy, failure: Failure, restarts: int) -> bool:
    if failure.setup_error and SETUP_ERROR_EXIT_CODE not in policy.retryable_exit_codes:
        return False  # deterministic: the next attempt would hold the GPUs to fail alike
    return policy.retries(failure.exit_code) and restarts < policy.backoff_limit


def give_up(policy: RunPolicy, failure: Failure, progress: Progress) -> Outcome:
    """The job fails, saying why this failure was not retried."""
    last = Outcome(status=JobStatus(last_failure=failure.as_status(progress.attempt)))
    if failure.setup_error:
        return last.then(fail(SETUP_ERROR, f"{failure.message()} (not retried)"))
    if policy.retries(failure.exit_code):
        return last.then(
            fail(
                "BackoffLimitExceeded",
                f"{progress.restarts} restarts used up runPolicy.backoffLimit "
                f"({policy.backoff_limit}); last failure: {failure.message()}",
            )
        )
    if policy.restart_policy is RestartPolicy.EXIT_CODE:
        return last.then(
            fail("NonRetryableExitCode", f"{failure.message()} (not retried under ExitCode)")
        )
    return last.then(fail("PodFailed", failure.message()))

"""What a failure does to the job: the first matching rule of
spec.runPolicy.failurePolicy, else the default rules, each with its budget (pure).

The default rules, in order, are what restartPolicy, backoffLimit and
retryableExitCodes always meant, with infrastructure faults taken out of backoffLimit:
1. a set-up error the trainer reported (exit code 78, unless in retryableExitCodes): the
   job fails (SetupError): every attempt would fail alike.
2. restartPolicy Never: the job fails (PodFailed).
3. an infrastructure fault (policy/failures/faults.py): a new attempt not counted against
   backoffLimit, up to infrastructureRetries.
4. a failure restartPolicy retries: a new attempt counted against backoffLimit.
5. otherwise the job fails (NonRetryableExitCode under ExitCode).
A stall the watchdog restarts from (fault Stalled, policy/steps/stall.py) that no rule matches
is a new attempt counted against backoffLimit, or fails the job under restartPolicy
Never.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from multigpu_operator.api.failure_policy import (
    INFRASTRUCTURE_FAULTS,
    FailureAction,
    FailureRule,
    Fault,
)
from multigpu_operator.api.lifecycle import RestartPolicy, RunPolicy
from multigpu_operator.policy.failures.failed_pods import (
    SETUP_ERROR,
    SETUP_ERROR_EXIT_CODE,
    Failure,
)
from multigpu_operator.policy.step import Progress

_FIELD = "spec.runPolicy"
BACKOFF_RULE = f"{_FIELD}.backoffLimit"
INFRASTRUCTURE_RULE = f"{_FIELD}.infrastructureRetries"
RESTART_POLICY_RULE = f"{_FIELD}.restartPolicy"


@dataclass(frozen=True)
class Verdict:
    """What a failure does: restart (replace) or fail, the rule that said so, and the
    counters after it. `fail_reason` is set when the job fails."""

    action: FailureAction
    rule: str  # the rule that decided, as the status names it
    progress: Progress  # the counters after this failure
    fail_reason: str = ""
    fail_message: str = ""
    # How the restart is counted, for the condition's message ("" when it is not).
    counted_as: str = ""

    @property
    def fails(self) -> bool:
        return bool(self.fail_reason)


def rule_name(index: int, rule: FailureRule) -> str:
    named = f" ({rule.name})" if rule.name else ""
    return f"{_FIELD}.failurePolicy.rules[{index}]{named}"


def matches(rule: FailureRule, failure: Failure) -> bool:
    """Every criterion the rule sets matches; within a list, any value does."""
    return (
        (rule.on_exit_codes is None or rule.on_exit_codes.matches(failure.exit_code))
        and (rule.on_reasons is None or bool(set(rule.on_reasons) & set(failure.reasons)))
        and (
            rule.on_pod_conditions is None
            or bool(set(rule.on_pod_conditions) & set(failure.conditions))
        )
        and (rule.on_faults is None or failure.fault in rule.on_faults)
    )


def judge(policy: RunPolicy, failure: Failure, progress: Progress) -> Verdict:
    """The verdict on one failure, with the counters it moves."""
    rules = policy.failure_policy.rules if policy.failure_policy else ()
    for index, rule in enumerate(rules):
        if matches(rule, failure):
            return _by_rule(policy, index, rule, failure, progress)
    return _by_default(policy, failure, progress)


def _by_rule(
    policy: RunPolicy, index: int, rule: FailureRule, failure: Failure, progress: Progress
) -> Verdict:
    name = rule_name(index, rule)
    action = rule.action
    if action is FailureAction.FAIL_JOB:
        return _failed(name, progress, "FailurePolicy", f"{name} matched: {failure.message()}")
    if action is FailureAction.IGNORE:
        return Verdict(action, name, progress)
    used = dict(progress.rule_restarts).get(index, 0)
    if rule.max_restarts is not None:
        if used >= rule.max_restarts:
            msg = (
                f"{used} restarts used up {name}'s maxRestarts ({rule.max_restarts}); "
                f"last failure: {failure.message()}"
            )
            return _failed(name, progress, "MaxRestartsExceeded", msg)
        counts = dict(progress.rule_restarts) | {index: used + 1}
        progress = replace(progress, rule_restarts=tuple(sorted(counts.items())))
    if action is FailureAction.RESTART_JOB:
        return _counted(policy, name, failure, progress)
    if rule.max_restarts is not None:
        counted_as = (
            f"restart {used + 1} of the rule's maxRestarts {rule.max_restarts}, "
            "not counted against backoffLimit"
        )
        return Verdict(action, name, progress, counted_as=counted_as)
    return _infrastructure(policy, name, failure, progress)


def _by_default(policy: RunPolicy, failure: Failure, progress: Progress) -> Verdict:
    if failure.fault is Fault.STALLED:
        # The stall watchdog's Restart: a new attempt even under restartPolicy ExitCode
        # (a stall has no exit code), counted; Never still means the first failure fails.
        if policy.restart_policy is RestartPolicy.NEVER:
            msg = f"{failure.message()} (restartPolicy Never)"
            return _failed(RESTART_POLICY_RULE, progress, str(Fault.STALLED), msg)
        return _counted(policy, BACKOFF_RULE, failure, progress)
    if failure.setup_error and SETUP_ERROR_EXIT_CODE not in policy.retryable_exit_codes:
        msg = f"{failure.message()} (not retried)"
        return _failed(RESTART_POLICY_RULE, progress, SETUP_ERROR, msg)
    if policy.restart_policy is RestartPolicy.NEVER:
        return _failed(RESTART_POLICY_RULE, progress, "PodFailed", failure.message())
    if failure.fault in INFRASTRUCTURE_FAULTS:
        return _infrastructure(policy, INFRASTRUCTURE_RULE, failure, progress)
    if policy.retries(failure.exit_code):
        return _counted(policy, BACKOFF_RULE, failure, progress)
    msg = f"{failure.message()} (not retried under ExitCode)"
    return _failed(RESTART_POLICY_RULE, progress, "NonRetryableExitCode", msg)


def _counted(policy: RunPolicy, name: str, failure: Failure, progress: Progress) -> Verdict:
    limit = policy.backoff_limit
    if progress.restarts >= limit:
        msg = (
            f"{progress.restarts} restarts used up runPolicy.backoffLimit ({limit}); "
            f"last failure: {failure.message()}"
        )
        return _failed(name, progress, "BackoffLimitExceeded", msg)
    progress = replace(progress, restarts=progress.restarts + 1)
    return Verdict(
        FailureAction.RESTART_JOB,
        name,
        progress,
        counted_as=f"restart {progress.restarts} of {limit}",
    )


def _infrastructure(policy: RunPolicy, name: str, failure: Failure, progress: Progress) -> Verdict:
    limit, used = policy.infrastructure_retries, progress.infrastructure_restarts
    if used >= limit:
        msg = (
            f"{used} restarts after infrastructure faults used up "
            f"runPolicy.infrastructureRetries ({limit}); last failure: {failure.message()}"
        )
        return _failed(name, progress, "InfrastructureRetriesExceeded", msg)
    progress = replace(progress, infrastructure_restarts=used + 1)
    return Verdict(
        FailureAction.RESTART_JOB_NOT_COUNTED,
        name,
        progress,
        counted_as=(
            f"infrastructure retry {used + 1} of {limit}, not counted against backoffLimit"
        ),
    )


def _failed(rule: str, progress: Progress, reason: str, message: str) -> Verdict:
    return Verdict(FailureAction.FAIL_JOB, rule, progress, reason, message)

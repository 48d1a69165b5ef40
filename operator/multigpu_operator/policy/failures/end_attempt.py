"""Ending an attempt for a failure (pure), the one way: the restarts step's first failed
replica and the stall watchdog's stalled ranks both come here. The failure-policy rules
judge it (rules.py): a new attempt, its number written before any pod goes, or the job
fails; the status records the failure, the attempt it ended (attempts.py) and the nodes
to avoid (avoidance.py). Elastic jobs replace pods instead of ending the attempt
(`replace_pods`).
"""

from __future__ import annotations

from dataclasses import replace

from multigpu_operator.api.failure_policy import FailureAction
from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.failures import attempts
from multigpu_operator.policy.failures.avoidance import avoided_after
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.failures.failed_pods import Failure
from multigpu_operator.policy.failures.rules import Verdict, judge
from multigpu_operator.policy.kube.conditions import cleared, condition
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.step import Observed, Outcome, Progress


def end_attempt(seen: Observed, progress: Progress, found: list[Failure]) -> Outcome:
    """The attempt ended by `found` (the first decides): a new attempt, or the job
    fails, as the failure-policy rules judge it."""
    failure = found[0]
    verdict = judge(seen.job.spec.run_policy, failure, progress)
    status = _recorded(seen, progress, verdict, found)
    if verdict.fails:
        return Outcome(status=status).then(fail(verdict.fail_reason, verdict.fail_message))
    attempt = progress.attempt + 1
    if verdict.action is FailureAction.RESTART_JOB:
        # The most attempts there may be: this one and the retries left in backoffLimit
        # (restarts not counted, a resume or a requeue may add more).
        most = attempt + seen.job.spec.run_policy.backoff_limit - verdict.progress.restarts
        msg = f"starting attempt {attempt} of {most}: {failure.message()}"
    else:
        msg = f"starting attempt {attempt} ({verdict.counted_as}): {failure.message()}"
    if verdict.rule.startswith("spec.runPolicy.failurePolicy"):
        msg += f"; decided by {verdict.rule}"
    reason = str(failure.fault) if failure.fault else "PodFailed"
    return Outcome(
        status=status,
        changes=(
            condition(ConditionType.RESTARTING, True, reason, msg, always_event=True),
            cleared(ConditionType.RUNNING, "Restarting", msg),
        ),
        delete_pods=tuple(name_of(p) for p in seen.older(attempt)),
        progress=replace(verdict.progress, attempt=attempt, restarted=progress.restarted + 1),
        stop=Phase.RESTARTING,
    )


def _recorded(
    seen: Observed, progress: Progress, verdict: Verdict, found: list[Failure]
) -> JobStatus:
    """The status after a decided failure: the counters, the failure and its rule, the
    attempt it ended, the nodes to avoid."""
    failure = found[0]
    previous = seen.previous
    ending = verdict.fail_reason or (str(failure.fault) if failure.fault else "PodFailed")
    ended = attempts.ended(previous, progress.attempt, seen.now, ending, verdict.rule, found)
    avoided = avoided_after(previous.avoided_nodes or [], found if not verdict.fails else [])
    recorded = JobStatus(
        last_failure=failure.as_status(progress.attempt, verdict.rule), attempts=ended
    )
    if avoided:
        recorded = recorded.merged(JobStatus(avoided_nodes=avoided))
    return verdict.progress.restart_counters().merged(recorded)


def replace_pods(
    seen: Observed, progress: Progress, failure: Failure, pods: tuple[str, ...]
) -> Outcome:
    """Elastic: `failure` judged once and, unless the job fails, `pods` replaced (the
    stall watchdog replaces the pods of the ranks that stopped)."""
    verdict = judge(seen.job.spec.run_policy, failure, progress)
    last = JobStatus(last_failure=failure.as_status(progress.attempt, verdict.rule))
    if verdict.fails:
        return Outcome(status=last).then(fail(verdict.fail_reason, verdict.fail_message))
    counted = f" ({verdict.counted_as})" if verdict.counted_as else ""
    msg = f"replacing {', '.join(pods)}{counted}: {failure.message()}"
    reason = str(failure.fault) if failure.fault else "PodFailed"
    return Outcome(
        status=last.merged(verdict.progress.restart_counters()),
        changes=(condition(ConditionType.RESTARTING, True, reason, msg, always_event=True),),
        delete_pods=pods,
        progress=replace(verdict.progress, restarted=progress.restarted + 1),
    )

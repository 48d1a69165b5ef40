"""The stall watchdog, spec.runPolicy.stall (pure): a job whose training step stands
still past a deadline while every pod of its attempt runs is stalled (a hung
collective, a dead data loader, a deadlock), and the watchdog names the ranks that
stopped and acts.

The deadline: deadlineSeconds when set (0: off); unset, automatic: on once the job has
reported progress, max(10 x the median step time, 300 s). The step counts as standing
still from the later of when it last moved (a checkpoint begun or ended counts as
moving) and when the attempt's pods last all started running, so start-up, a restart
and an Elastic pod replaced are never a stall. A checkpoint that every rank is in
(writing it or waiting at its barrier) is not a stall however long it takes; one that a
rank does not answer from or is not in while the others wait for it is (a rank frozen
or hung just before a save leaves the others at the checkpoint barrier). A job with a
set deadline that reports nothing is stalled once that long has passed since its pods
all ran.

Stalled: condition Stalled True naming the ranks (those whose processes did not answer,
else those at the lowest step) and a Warning Event, then the action: Notify does
nothing more (Stalled turns False once the step moves); Fail fails the job (reason
Stalled); Restart is a failure with fault Stalled, judged by the failure-policy rules
(policy/failures/rules.py) like any other: a new attempt, or Elastic, the named ranks'
pods replaced.
"""

from __future__ import annotations

from datetime import datetime

from multigpu_operator.api.failure_policy import Fault
from multigpu_operator.api.pod_labels import replica_index
from multigpu_operator.api.stall import (
    AUTO_FLOOR_SECONDS,
    AUTO_STEP_TIMES,
    StallAction,
    StallPolicy,
)
from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.failures.end_attempt import end_attempt, replace_pods
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.failures.failed_pods import Failure
from multigpu_operator.policy.failures.faults import Diagnosis, node_of
from multigpu_operator.policy.kube.conditions import ConditionChange, cleared, condition
from multigpu_operator.policy.kube.pods import count_pods, name_of
from multigpu_operator.policy.kube.timestamps import parse_time, rfc3339
from multigpu_operator.policy.step import Observed, Outcome, Progress
from multigpu_operator.policy.steps.stall_ranks import describe, stopped
from multigpu_operator.policy.training import TrainingReport

STALLED = "Stalled"


def stall_watchdog(seen: Observed, progress: Progress) -> Outcome:
    policy = seen.job.spec.run_policy.stall or StallPolicy()
    report = seen.training if seen.training and seen.training.attempt == progress.attempt else None
    deadline = stall_deadline(policy, report, seen.previous)
    if deadline is None:
        if policy.deadline_seconds == 0:
            msg = "the stall watchdog is off (spec.runPolicy.stall.deadlineSeconds 0)"
            return Outcome(changes=(cleared(ConditionType.STALLED, "WatchdogOff", msg),))
        return Outcome()
    if not _all_running(seen, progress):
        return Outcome()  # starting up: the pods' changes bring the next pass
    if report and _checkpointing(report):
        # Not a stall; looked at again in case no later report comes.
        return Outcome(wake_after=(deadline,))
    started = [t for t in (running_since(seen, progress), report and report.last_change) if t]
    if not started:
        return Outcome()
    since = max(started)
    stood = (seen.now - since).total_seconds()
    if stood < deadline:
        return Outcome(changes=_recovered(seen, report), wake_after=(deadline - stood,))
    return _act(seen, progress, policy.action, report, _message(report, since, deadline))


def stall_deadline(
    policy: StallPolicy, report: TrainingReport | None, previous: JobStatus
) -> float | None:
    """Seconds the step may stand still; None when the watchdog is off (0, or automatic
    before the job reported any progress)."""
    if policy.deadline_seconds is not None:
        return float(policy.deadline_seconds) if policy.deadline_seconds else None
    step_seconds = report.step_seconds if report else None
    if report is None:
        known = previous.progress
        if not known:
            return None
        rate = known.steps_per_second or 0.0
        step_seconds = 1 / rate if rate > 0 else None
    if not step_seconds or step_seconds <= 0:
        return float(AUTO_FLOOR_SECONDS)
    return max(AUTO_STEP_TIMES * step_seconds, float(AUTO_FLOOR_SECONDS))


def running_since(seen: Observed, progress: Progress) -> datetime | None:
    """When the attempt's pods last all ran: the job's Running condition turning True,
    or the latest start of a pod of the attempt (an Elastic pod replaced), the later."""
    times = [_running_condition_time(seen)]
    for pod in seen.current(progress.attempt):
        pod_status = pod.get("status") or {}
        started = [
            parse_time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
            for cs in pod_status.get("containerStatuses") or []
        ]
        times += [*started, parse_time(pod_status.get("startTime"))]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _running_condition_time(seen: Observed) -> datetime | None:
    running = seen.previous.condition(ConditionType.RUNNING)
    return running.last_transition_time if running and running.holds else None


def _all_running(seen: Observed, progress: Progress) -> bool:
    """The job was Running when the pass began and every desired pod runs."""
    running = count_pods(seen.current(progress.attempt)).running
    return seen.previous_phase is Phase.RUNNING and running >= len(seen.desired.pods)


def _checkpointing(report: TrainingReport) -> bool:
    """A checkpoint is being written and every rank read is in it (none are read while
    it is younger than a read: progress_reads.reads_everyone)."""
    if not (report.checkpointing or any(p.checkpointing for p in report.processes)):
        return False
    return all(p.answered and p.checkpointing for p in report.processes)


def _recovered(seen: Observed, report: TrainingReport | None) -> tuple[ConditionChange, ...]:
    """Stalled turns False once the step of the current attempt moved after it was set."""
    stalled = seen.previous.condition(ConditionType.STALLED)
    if not stalled or not stalled.holds or report is None:
        return ()
    set_at = stalled.last_transition_time
    if set_at is not None and report.last_change <= set_at:
        return ()
    msg = f"the step moved again: step {report.step} at {rfc3339(report.last_change)}"
    return (cleared(ConditionType.STALLED, "Progressing", msg),)


def _message(report: TrainingReport | None, since: datetime, deadline: float) -> str:
    limit = f"deadline {deadline:g}s"
    if report is None:
        told = f"no progress reported since the pods all ran at {rfc3339(since)} ({limit})"
    else:
        told = f"the step stood at {report.step} since {rfc3339(since)} ({limit})"
    named = describe(report)
    return f"{told}: {named}" if named else told


def _act(
    seen: Observed,
    progress: Progress,
    action: StallAction,
    report: TrainingReport | None,
    msg: str,
) -> Outcome:
    acting = action is not StallAction.NOTIFY
    stalled = Outcome(
        changes=(condition(ConditionType.STALLED, True, STALLED, msg, always_event=acting),)
    )
    if action is StallAction.NOTIFY:
        return stalled
    if action is StallAction.FAIL:
        return stalled.then(fail(STALLED, msg))
    failure, pods = _as_failure(seen, progress, report, msg)
    if seen.elastic:
        return stalled.then(replace_pods(seen, progress, failure, pods))
    return stalled.then(end_attempt(seen, progress, [failure]))


def _as_failure(
    seen: Observed, progress: Progress, report: TrainingReport | None, msg: str
) -> tuple[Failure, tuple[str, ...]]:
    """The stall as the failure the rules judge (the first named rank's pod, else
    replica 0's), and the pods an Elastic job replaces (the named ranks', else all)."""
    current = seen.current(progress.attempt)
    named = stopped(report)
    by_name = {name_of(p): p for p in current}
    pods = tuple(dict.fromkeys(p.pod for p in named if p.pod in by_name))
    if pods:
        first = by_name[pods[0]]
    else:
        first = min(current, key=replica_index)
        pods = tuple(name_of(p) for p in current)
    node = node_of(first)
    failure = Failure(
        pod=name_of(first),
        replica=str(replica_index(first)),
        exit_code=None,
        reason=STALLED,
        detail=msg,
        reasons=(STALLED,),
        node=node,
        diagnosis=Diagnosis(Fault.STALLED, ""),  # the message names the node already
    )
    return failure, pods

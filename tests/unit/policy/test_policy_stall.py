"""The stall watchdog, spec.runPolicy.stall: the deadline, when a job is stalled, the
ranks named and each action (policy/steps/stall.py, pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from multigpu_operator.api.stall import StallPolicy
from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.policy.kube.conditions import ConditionChange
from multigpu_operator.policy.step import Outcome
from multigpu_operator.policy.steps.stall import stall_deadline, stall_watchdog
from multigpu_operator.policy.steps.stall_ranks import describe, stopped
from multigpu_operator.policy.training import ProcessReport, TrainingReport
from support.policy import at, elastic_job, job, observed, pod, progress, running, stamp, written

# The job ran from T0 (its Running condition), the step last moved at T0+100.
RUNNING_SINCE = {**written("Running", reason="PodsRunning"), "lastTransitionTime": stamp(0)}
PREVIOUS = {"phase": "Running", "attempt": 1, "conditions": [RUNNING_SINCE]}


def report(**fields: Any) -> TrainingReport:
    base = TrainingReport(
        attempt=1, step=500, read_at=at(100), last_change=at(100), step_seconds=2.0
    )
    return replace(base, **fields)


def proc(rank: int, step: int | None = 500, *, answered: bool = True) -> ProcessReport:
    return ProcessReport(
        pod=f"job-{rank}",
        replica=rank,
        local_rank=0,
        rank=rank,
        node=f"n{rank}",
        answered=answered,
        step=step if answered else None,
    )


def saving(rank: int) -> ProcessReport:
    """A rank in a checkpoint: writing it or waiting at its barrier."""
    return replace(proc(rank), checkpointing=True)


def stall_of(outcome: Outcome) -> ConditionChange | None:
    return next(
        (
            c
            for c in outcome.changes
            if isinstance(c, ConditionChange) and c.type is ConditionType.STALLED
        ),
        None,
    )


def run(
    *,
    stall: dict[str, Any] | None = None,
    given: TrainingReport | None = None,
    now: float = 500,
    pods: list[dict[str, Any]] | None = None,
    previous: dict[str, Any] | None = None,
    **spec: Any,
) -> Outcome:
    j = job(runPolicy={**({"stall": stall} if stall else {}), **spec})
    seen = observed(
        j,
        pods=running(0, 1) if pods is None else pods,
        previous=PREVIOUS if previous is None else previous,
        now=now,
        training=given,
    )
    return stall_watchdog(seen, progress())


@pytest.mark.parametrize(
    ("stall", "given", "previous", "deadline"),
    [
        pytest.param(None, None, {}, None, id="auto-before-any-report-off"),
        pytest.param(None, report(), {}, 300.0, id="auto-floor"),
        pytest.param(None, report(step_seconds=45.0), {}, 450.0, id="auto-10-steps"),
        pytest.param(None, report(step_seconds=None), {}, 300.0, id="auto-no-step-time"),
        pytest.param(
            None, None, {"progress": {"step": 9, "stepsPerSecond": 0.02}}, 500.0, id="auto-earlier"
        ),
        pytest.param(None, None, {"progress": {"step": 9}}, 300.0, id="auto-earlier-no-rate"),
        pytest.param({"deadlineSeconds": 0}, report(), {}, None, id="off"),
        pytest.param({"deadlineSeconds": 60}, None, {}, 60.0, id="explicit-without-report"),
        pytest.param({"deadlineSeconds": 60}, report(step_seconds=45.0), {}, 60.0, id="explicit"),
    ],
)
def test_deadline(
    stall: dict[str, Any] | None,
    given: TrainingReport | None,
    previous: dict[str, Any],
    deadline: float | None,
) -> None:
    policy = StallPolicy.model_validate(stall or {})
    assert stall_deadline(policy, given, JobStatus.read(previous)) == deadline


@pytest.mark.parametrize(
    ("kw", "stalled", "wake"),
    [
        pytest.param({"given": report(), "now": 399}, False, (1.0,), id="auto-not-yet"),
        pytest.param({"given": report(), "now": 400}, True, (), id="auto-due"),
        pytest.param({"now": 10**6}, False, (), id="auto-never-reported"),
        pytest.param(
            {"given": report(checkpointing=True), "now": 10**6}, False, (300.0,), id="ckpt"
        ),
        pytest.param(
            {"given": report(checkpointing=True, processes=(saving(0), saving(1))), "now": 10**6},
            False,
            (300.0,),
            id="every-rank-in-a-long-checkpoint",
        ),
        pytest.param(
            {"given": report(processes=(saving(0), proc(1))), "now": 399},
            False,
            (1.0,),
            id="a-rank-missing-from-a-checkpoint-not-yet",
        ),
        pytest.param(
            {"given": report(checkpointing=True, processes=(saving(0), proc(1))), "now": 400},
            True,
            (),
            id="a-rank-missing-from-a-checkpoint",
        ),
        pytest.param(
            {
                "given": report(checkpointing=True, processes=(saving(0), proc(1, answered=False))),
                "now": 400,
            },
            True,
            (),
            id="a-rank-silent-in-a-checkpoint",
        ),
        pytest.param(
            {"given": report(), "pods": [*running(0), pod(1)], "now": 10**6},
            False,
            (),
            id="start-up",
        ),
        pytest.param(
            {"given": report(), "previous": {"phase": "Pending"}, "now": 10**6},
            False,
            (),
            id="not-running-yet",
        ),
        pytest.param(
            {"given": report(attempt=2), "now": 10**6}, False, (), id="report-of-another-attempt"
        ),
        pytest.param(
            {"stall": {"deadlineSeconds": 60}, "now": 59}, False, (1.0,), id="explicit-from-running"
        ),
        pytest.param(
            {"stall": {"deadlineSeconds": 60}, "now": 60}, True, (), id="explicit-reports-nothing"
        ),
        pytest.param(
            {"stall": {"deadlineSeconds": 0}, "given": report(), "now": 10**6},
            False,
            (),
            id="off",
        ),
    ],
)
def test_when_a_job_is_stalled(kw: dict[str, Any], stalled: bool, wake: tuple[float, ...]) -> None:
    outcome = run(stall={"action": "Notify", **kw.pop("stall", {})}, **kw)
    change = stall_of(outcome)
    assert (change is not None and change.status) == stalled
    assert outcome.wake_after == wake
    assert outcome.stop is None


def test_a_pod_started_later_counts_from_its_start() -> None:
    # An Elastic pod replaced: the deadline counts from when it started running.
    late = running(0, 1)
    late[1]["status"]["startTime"] = stamp(450)
    outcome = run(stall={"deadlineSeconds": 60, "action": "Notify"}, pods=late, now=500)
    assert stall_of(outcome) is None
    assert outcome.wake_after == (10.0,)


@pytest.mark.parametrize(
    ("processes", "named"),
    [
        pytest.param((), "", id="not-read"),
        pytest.param(
            (proc(0), proc(3, answered=False), proc(1)),
            "rank 3 (pod job-3, node n3) does not answer",
            id="silent",
        ),
        pytest.param(
            (proc(2, answered=False), proc(1, answered=False), proc(0, 7)),
            "rank 1 (pod job-1, node n1), rank 2 (pod job-2, node n2) do not answer",
            id="silent-first-by-rank",
        ),
        pytest.param(
            (proc(0, 10), proc(1, 9), proc(2, 10)),
            "lowest step 9: rank 1 (pod job-1, node n1)",
            id="lowest-step",
        ),
        pytest.param(
            (saving(0), proc(1), saving(2)),
            "rank 1 (pod job-1, node n1) does not reach the checkpoint the others wait in",
            id="missing-from-a-checkpoint",
        ),
        pytest.param(
            (saving(0), proc(1, answered=False)),
            "rank 1 (pod job-1, node n1) does not answer",
            id="silent-in-a-checkpoint",
        ),
        pytest.param(
            tuple(proc(r, 4) for r in range(10)),
            "lowest step 4: "
            + ", ".join(f"rank {r} (pod job-{r}, node n{r})" for r in range(8))
            + " and 2 more",
            id="capped",
        ),
    ],
)
def test_ranks_named(processes: tuple[ProcessReport, ...], named: str) -> None:
    assert describe(report(processes=processes)) == named


def test_a_node_unknown_is_left_out() -> None:
    silent = replace(proc(3, answered=False), node="")
    assert describe(report(processes=(silent,))) == "rank 3 (pod job-3) does not answer"
    assert stopped(None) == ()


SILENT_RANK_1 = report(processes=(proc(0), proc(1, answered=False)))
MESSAGE = (
    f"the step stood at 500 since {stamp(100)} (deadline 300s): "
    "rank 1 (pod job-1, node n1) does not answer"
)


def test_notify_sets_stalled_with_a_warning_and_nothing_more() -> None:
    outcome = run(stall={"action": "Notify"}, given=SILENT_RANK_1)
    assert outcome.changes == (ConditionChange(ConditionType.STALLED, True, "Stalled", MESSAGE),)
    assert (outcome.stop, outcome.delete_pods, outcome.progress) == (None, (), None)


def test_fail_fails_the_job_with_reason_stalled() -> None:
    outcome = run(stall={"action": "Fail"}, given=SILENT_RANK_1)
    assert outcome.stop is Phase.FAILED
    failed = [c for c in outcome.changes if isinstance(c, ConditionChange) and c.status]
    assert [(c.type, c.reason, c.message) for c in failed] == [
        (ConditionType.STALLED, "Stalled", MESSAGE),
        (ConditionType.FAILED, "Stalled", MESSAGE),
    ]


def test_restart_starts_a_new_attempt_naming_the_stalled_rank() -> None:
    outcome = run(given=SILENT_RANK_1)
    assert outcome.stop is Phase.RESTARTING
    assert outcome.progress is not None
    assert (outcome.progress.attempt, outcome.progress.restarts) == (2, 1)
    last = outcome.status.last_failure
    assert last is not None
    assert (last.pod, last.replica_index, last.node, last.fault, last.rule) == (
        "job-1",
        1,
        "gpu-node-0",  # the node of its pod
        "Stalled",
        "spec.runPolicy.backoffLimit",
    )
    restarting = next(
        c for c in outcome.changes if isinstance(c, ConditionChange) and c.type == "Restarting"
    )
    assert restarting.reason == "Stalled"
    assert "rank 1 (pod job-1, node n1) does not answer" in restarting.message
    assert outcome.status.attempts
    assert outcome.status.attempts[-1].reason == "Stalled"


def test_restart_under_restart_policy_never_fails() -> None:
    outcome = run(given=SILENT_RANK_1, restartPolicy="Never")
    assert outcome.stop is Phase.FAILED
    assert outcome.status.last_failure
    assert outcome.status.last_failure.fault == "Stalled"


def test_restart_with_the_backoff_limit_used_up_fails() -> None:
    j = job(runPolicy={"backoffLimit": 0})
    seen = observed(j, running(0, 1), PREVIOUS, now=500, training=SILENT_RANK_1)
    outcome = stall_watchdog(seen, progress())
    assert outcome.stop is Phase.FAILED
    fail = next(c for c in outcome.changes if isinstance(c, ConditionChange) and c.type == "Failed")
    assert fail.reason == "BackoffLimitExceeded"


def test_elastic_replaces_the_pods_of_the_named_ranks() -> None:
    j = elastic_job(3)
    seen = observed(j, running(0, 1, 2), PREVIOUS, now=500, training=SILENT_RANK_1)
    outcome = stall_watchdog(seen, progress())
    assert outcome.delete_pods == ("job-1",)
    assert outcome.stop is None
    assert outcome.progress is not None
    assert outcome.progress.restarts == 1


def test_elastic_replaces_every_pod_when_no_rank_is_named() -> None:
    j = elastic_job(3, runPolicy={"stall": {"deadlineSeconds": 60}})
    seen = observed(j, running(0, 1, 2), PREVIOUS, now=500)
    outcome = stall_watchdog(seen, progress())
    assert outcome.delete_pods == ("job-0", "job-1", "job-2")


STALLED_AT_300 = {**written("Stalled", reason="Stalled"), "lastTransitionTime": stamp(300)}


@pytest.mark.parametrize(
    ("moved_at", "cleared"),
    [
        pytest.param(450, True, id="moved-after"),
        pytest.param(300, False, id="not-since"),
    ],
)
def test_stalled_turns_false_once_the_step_moves(moved_at: float, cleared: bool) -> None:
    previous = {**PREVIOUS, "conditions": [RUNNING_SINCE, STALLED_AT_300]}
    given = report(step=501, last_change=at(moved_at), read_at=at(moved_at))
    outcome = run(stall={"action": "Notify"}, given=given, previous=previous, now=460)
    change = stall_of(outcome)
    if cleared:
        assert change is not None
        assert not change.status
        assert change.reason == "Progressing"
        assert change.only_if_true
    else:
        assert change is None


def test_turning_the_watchdog_off_clears_stalled() -> None:
    previous = {**PREVIOUS, "conditions": [RUNNING_SINCE, STALLED_AT_300]}
    change = stall_of(run(stall={"deadlineSeconds": 0}, previous=previous))
    assert change is not None
    assert (change.status, change.reason) == (False, "WatchdogOff")

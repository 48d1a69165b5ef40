"""Whole lives through the pure pass with the processes' reports: progress in the
status, and the stall watchdog's actions (reconcile.decide, no cluster)."""

from __future__ import annotations

from typing import Any

from multigpu_operator.policy.training import ProcessReport, TrainingReport
from support.lifecycle import JobRun, job_object
from support.status_schema import status_problems


def ddp(**run_policy: Any) -> JobRun:
    return JobRun(job_object(replicas=2, gpusPerReplica=2, runPolicy=run_policy))


def started(run: JobRun) -> None:
    """Pods created, all running: the job is Running."""
    run.step()
    run.run_all()
    run.step()
    assert run.status["phase"] == "Running"


def reports(run: JobRun, step: int, *, moved: bool = True, **fields: Any) -> None:
    """The processes of the current attempt report `step`, read now; `moved`: the step
    changed now (else it stands where the last report had it)."""
    last = run.training
    still = last is not None and not moved and last.attempt == run.status["attempt"]
    fields = {"total_steps": 1000, "step_seconds": 1.0, "publish": True, **fields}
    run.training = TrainingReport(
        attempt=int(run.status["attempt"]),
        step=step,
        read_at=run.now,
        last_change=last.last_change if still and last else run.now,
        **fields,
    )


def silent(rank: int) -> tuple[ProcessReport, ...]:
    """Per-process answers: `rank` (of 2 pods) did not answer."""
    return tuple(
        ProcessReport(f"job-{r}", r, 0, r, "gpu-node-0", r != rank, None if r == rank else 40)
        for r in range(2)
    )


def step(run: JobRun, seconds: float = 0) -> None:
    run.step(seconds)
    assert status_problems(run.status) == []


def condition(run: JobRun, ctype: str) -> tuple[str, str] | None:
    found = [c for c in run.status.get("conditions", []) if c["type"] == ctype]
    return (found[0]["status"], found[0]["reason"]) if found else None


def test_stall_restart_new_attempt_progresses_and_succeeds() -> None:
    run = ddp()
    started(run)
    reports(run, 40)
    step(run, 5)
    assert run.status["progress"]["summary"] == "4%"
    assert run.status["progress"]["eta"] == "16m00s"
    # The step stands at 40 (since T0) for the automatic deadline, max(10 x 1 s, 300 s).
    reports(run, 40, moved=False, processes=silent(1), publish=False)
    step(run, 294)
    assert run.status["phase"] == "Running"
    assert run.decisions[-1].requeue_after == 1.0
    step(run, 1)
    assert run.status["phase"] == "Restarting"
    assert run.status["attempt"] == 2
    assert run.status["restarts"] == 1
    assert condition(run, "Stalled") == ("True", "Stalled")
    assert run.status["lastFailure"]["fault"] == "Stalled"
    assert run.status["lastFailure"]["pod"] == "job-1"
    stalled = run.condition("Stalled")["message"]
    assert "rank 1 (pod job-1, node gpu-node-0) does not answer" in stalled
    assert ("Warning", "Stalled") in run.events()
    assert run.status["attempts"][0]["reason"] == "Stalled"
    # The report of attempt 1 is stale now: it neither stalls attempt 2 nor is shown.
    step(run)
    run.run_all()
    step(run, 600)
    assert run.status["phase"] == "Running"
    assert run.attempts() == {"2"}
    assert run.status["progress"]["step"] == 40
    reports(run, 60, resumed_step=40)
    step(run, 5)
    assert run.status["progress"]["resumedStep"] == 40
    assert condition(run, "Stalled") == ("False", "Progressing")
    reports(run, 1000, publish=False)
    for name in list(run.pods):
        run.set_phase(name, "Succeeded", 0)
    step(run, 5)
    assert run.status["phase"] == "Succeeded"
    assert run.status["progress"]["summary"] == "100%"  # written as the job left Running


def test_notify_sets_and_clears_stalled() -> None:
    run = ddp(stall={"action": "Notify", "deadlineSeconds": 120})
    started(run)
    reports(run, 40)
    step(run, 1)
    reports(run, 40, moved=False, publish=False)
    step(run, 120)
    assert condition(run, "Stalled") == ("True", "Stalled")
    assert run.status["phase"] == "Running"
    assert run.status["attempt"] == 1
    assert run.events().count(("Warning", "Stalled")) == 1
    step(run, 60)  # still stalled: no second event, no action
    assert run.events().count(("Warning", "Stalled")) == 1
    reports(run, 41, publish=False)
    step(run, 5)
    assert condition(run, "Stalled") == ("False", "Progressing")
    assert run.status["phase"] == "Running"
    assert run.status["progress"]["step"] == 40  # no write budget: the progress waits


def test_no_stall_while_checkpointing() -> None:
    run = ddp()
    started(run)
    reports(run, 40, checkpointing=True)
    step(run, 10_000)
    assert condition(run, "Stalled") is None
    assert run.status["phase"] == "Running"


def test_a_rank_frozen_before_a_checkpoint_stalls_the_others_waiting_in_it() -> None:
    # Rank 0 wrote the checkpoint and waits at its barrier for rank 1, which stopped just
    # before the save: the checkpoint is no excuse once rank 1 is not in it.
    run = ddp(stall={"deadlineSeconds": 60})
    started(run)
    reports(run, 40, checkpointing=True)
    step(run, 30)
    assert condition(run, "Stalled") is None
    waiting = (
        ProcessReport("job-0", 0, 0, 0, "gpu-node-0", True, 40, checkpointing=True),
        ProcessReport("job-1", 1, 0, 1, "gpu-node-0", False),
    )
    reports(run, 40, moved=False, checkpointing=True, processes=waiting, publish=False)
    step(run, 30)
    assert condition(run, "Stalled") == ("True", "Stalled")
    assert run.status["attempt"] == 2
    assert (
        "rank 1 (pod job-1, node gpu-node-0) does not answer" in run.condition("Stalled")["message"]
    )


def test_no_stall_during_start_up() -> None:
    # An explicit deadline counts from when the pods all run: pods pending for
    # longer are a start-up (gang, startPolicy), not a stall.
    run = ddp(stall={"deadlineSeconds": 60})
    step(run)
    step(run, 600)
    assert condition(run, "Stalled") is None
    run.run_all()
    step(run, 1)
    assert run.status["phase"] == "Running"
    step(run, 59)
    assert condition(run, "Stalled") is None
    step(run, 1)  # a job that reports nothing is stalled once the deadline passed
    assert condition(run, "Stalled") == ("True", "Stalled")
    assert run.status["attempt"] == 2


def test_a_stalled_rule_restarts_without_counting() -> None:
    rule = {"action": "RestartJobNotCounted", "onFaults": ["Stalled"], "maxRestarts": 1}
    run = ddp(stall={"deadlineSeconds": 60}, failurePolicy={"rules": [rule]})
    for attempt in (1, 2):
        started(run)
        reports(run, 10, publish=False)
        step(run, 60)
        assert run.status["attempt"] == attempt + 1 or run.status["phase"] == "Failed"
    assert run.status["phase"] == "Failed"
    assert run.status["reason"] == "MaxRestartsExceeded"
    assert run.status["restarts"] == 0
    assert run.status["ruleRestarts"] == [{"index": 0, "restarts": 1}]
    assert run.status["lastFailure"]["rule"] == "spec.runPolicy.failurePolicy.rules[0]"


def test_fail_fails_the_job() -> None:
    run = ddp(stall={"action": "Fail"})
    started(run)
    reports(run, 40, step_seconds=60.0)  # automatic: 10 steps of 60 s
    step(run, 599)
    assert run.status["phase"] == "Running"
    step(run, 1)
    assert run.status["phase"] == "Failed"
    assert run.status["reason"] == "Stalled"
    assert condition(run, "Stalled") == ("True", "Stalled")
    assert run.status["progress"]["step"] == 40


def test_elastic_replaces_the_stalled_ranks_pod() -> None:
    obj = job_object(
        "Elastic",
        replicas=2,
        gpusPerReplica=2,
        elastic={"minReplicas": 1, "maxReplicas": 2},
        runPolicy={"stall": {"deadlineSeconds": 60}},
    )
    run = JobRun(obj)
    started(run)
    reports(run, 40, processes=silent(1), publish=False)
    step(run, 60)
    assert condition(run, "Stalled") == ("True", "Stalled")
    assert set(run.pods) == {"job-0"}  # job-1 replaced, the attempt goes on
    assert run.status["attempt"] == 1
    assert run.status["restarts"] == 1
    step(run)
    run.set_phase("job-1", "Running")
    run.pods["job-1"]["status"]["startTime"] = run.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    step(run, 59)  # the new pod started a minute ago at most: no second stall
    assert run.status["restarts"] == 1

"""status.attempts: opened by the pass that plans an attempt, closed by the pass that
ends it (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.limits import MAX_FAILED_PODS_KEPT
from multigpu_operator.api.status import JobStatus
from multigpu_operator.policy.failures.attempts import brought_up_to_date, ended
from multigpu_operator.policy.failures.failed_pods import Failure
from support.lifecycle import JobRun, job_object
from support.policy import at, stamp

OPEN_1 = {"attempt": 1, "startTime": stamp(0)}


def history(*records: dict[str, Any]) -> JobStatus:
    return JobStatus.read({"attempts": list(records)})


def dumped(records: list[Any]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json", by_alias=True, exclude_unset=True) for r in records]


@pytest.mark.parametrize(
    ("before", "attempt", "ended_", "runs", "after"),
    [
        pytest.param(history(), 1, False, True, [OPEN_1], id="first-pass-opens-attempt-1"),
        pytest.param(history(OPEN_1), 1, False, True, [OPEN_1], id="running-stays-open"),
        pytest.param(
            history(OPEN_1),
            2,
            False,
            True,
            [
                {**OPEN_1, "endTime": stamp(9), "reason": "Suspended"},
                {"attempt": 2, "startTime": stamp(9)},
            ],
            id="a-resume-closes-the-old-one",
        ),
        pytest.param(
            history(OPEN_1),
            1,
            True,
            False,
            [{**OPEN_1, "endTime": stamp(9), "reason": "Suspended"}],
            id="suspended-closes-it",
        ),
        pytest.param(history(), 1, False, False, [], id="created-suspended-lists-nothing"),
        pytest.param(
            history(),
            1,
            True,
            True,
            [{"attempt": 1, "startTime": stamp(9), "endTime": stamp(9), "reason": "Suspended"}],
            id="failed-before-any-pod",
        ),
    ],
)
def test_brought_up_to_date(
    before: JobStatus, attempt: int, ended_: bool, runs: bool, after: list[dict[str, Any]]
) -> None:
    now = at(0) if not ended_ and attempt == 1 else at(9)
    records = brought_up_to_date(before, attempt, now, "Suspended", ended=ended_, runs=runs)
    assert dumped(records) == after


def test_an_ended_attempt_keeps_its_start_and_the_first_failed_pods() -> None:
    failed = [Failure(f"job-{i}", str(i), 1, "Error", node="n") for i in range(10)]
    (record,) = dumped(ended(history(OPEN_1), 1, at(5), "PodFailed", "rule", failed))
    assert record["startTime"] == stamp(0)
    assert record["endTime"] == stamp(5)
    assert (record["reason"], record["rule"]) == ("PodFailed", "rule")
    assert len(record["failedPods"]) == MAX_FAILED_PODS_KEPT
    assert record["failedPods"][0] == {
        "pod": "job-0",
        "replicaIndex": 0,
        "node": "n",
        "exitCode": 1,
        "reason": "Error",
    }


def test_suspend_and_resume_through_the_pass() -> None:
    run = JobRun(job_object(replicas=2, suspend=True))
    run.step()
    assert "attempts" not in run.status
    run.obj["spec"]["suspend"] = False
    run.step(10)
    run.step()
    run.run_all()
    run.step()
    run.obj["spec"]["suspend"] = True
    run.step(10)
    (first,) = run.status["attempts"]
    assert (first["attempt"], first["reason"], first["endTime"]) == (1, "Suspended", stamp(20))
    run.obj["spec"]["suspend"] = False
    run.step(10)
    run.step()
    for name in run.pods:
        run.set_phase(name, "Succeeded", 0)
    run.step(5)
    assert run.status["phase"] == "Succeeded"
    second = run.status["attempts"][1]
    assert (second["attempt"], second["reason"]) == (2, "PodsSucceeded")
    assert second["startTime"] == stamp(30)

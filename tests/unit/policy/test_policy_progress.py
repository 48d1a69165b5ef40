"""status.progress from the processes' report: what is derived, and when it is written
(policy/steps/progress.py, pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from multigpu_operator.api.status import Phase
from multigpu_operator.policy.steps.progress import eta_text, job_progress, published_progress
from multigpu_operator.policy.training import TrainingReport
from support.policy import at, observed, pod, stamp
from support.status_schema import status_problems


def report(**fields: Any) -> TrainingReport:
    """Attempt 1 at step 1200, read at T0+100, the step last moved at T0+90."""
    base = TrainingReport(attempt=1, step=1200, read_at=at(100), last_change=at(90))
    return replace(base, **fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {},
            {
                "step": 1200,
                "summary": "step 1200",
                "lastProgressTime": stamp(90),
                "observedTime": stamp(100),
            },
            id="step-alone",
        ),
        pytest.param(
            {"total_steps": 10000, "step_seconds": 0.5, "samples_per_second": 512.0},
            {
                "step": 1200,
                "totalSteps": 10000,
                "percent": 12,
                "summary": "12%",
                "stepsPerSecond": 2.0,
                "samplesPerSecond": 512.0,
                "eta": "1h13m",  # 8800 steps at 2 per second: 4400 s
                "estimatedFinishTime": stamp(100 + 4400),
                "lastProgressTime": stamp(90),
                "observedTime": stamp(100),
            },
            id="total-and-rate",
        ),
        pytest.param(
            {"total_steps": 10000},
            {"percent": 12, "summary": "12%"},
            id="total-without-rate-has-no-eta",
        ),
        pytest.param(
            {"total_steps": 0, "step_seconds": 1.0},
            {"summary": "step 1200", "stepsPerSecond": 1.0},
            id="total-zero-is-unknown",
        ),
        pytest.param(
            {"step": 10500, "total_steps": 10000, "step_seconds": 1.0},
            {"percent": 100, "summary": "100%", "eta": "0s"},
            id="past-the-total",
        ),
        pytest.param(
            {"epoch": 3, "resumed_step": 1000},
            {"epoch": 3, "resumedStep": 1000},
            id="epoch-and-resume",
        ),
        pytest.param({"resumed_step": 0}, {"summary": "step 1200"}, id="resumed-at-0-is-none"),
        pytest.param(
            {"samples_per_second": float("nan"), "step_seconds": float("inf")},
            {"summary": "step 1200"},
            id="nan-and-inf-left-out",
        ),
        pytest.param(
            {"samples_per_second": -1.0, "step_seconds": -2.0, "step": -5},
            {"step": 0, "summary": "step 0"},
            id="negatives-left-out",
        ),
        pytest.param(
            {"step_seconds": 3.0},
            {"stepsPerSecond": 0.3333},
            id="rate-rounded",
        ),
        pytest.param(
            {"total_steps": 2**62, "step_seconds": 3600.0},
            {"percent": 0, "summary": "0%"},
            id="eta-beyond-reason-left-out",
        ),
    ],
)
def test_job_progress(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    shown = job_progress(report(**fields)).model_dump(
        mode="json", by_alias=True, exclude_unset=True
    )
    assert shown.items() >= expected.items()
    if "eta" not in expected and "totalSteps" not in fields:
        assert "eta" not in shown
    assert status_problems({"progress": shown}) == []


def test_eta_beyond_reason_has_no_eta() -> None:
    shown = job_progress(report(total_steps=2**62, step_seconds=3600.0))
    assert shown.eta is None
    assert shown.estimated_finish_time is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (40.4, "40s"),
        (60, "1m00s"),
        (185, "3m05s"),
        (4320, "1h12m"),
        (4379, "1h12m"),
        (3600 * 50 + 60, "2d02h"),
        (86400 * 400, "400d00h"),
    ],
)
def test_eta_text(seconds: float, text: str) -> None:
    assert eta_text(seconds) == text


RUNNING = {"phase": "Running", "attempt": 1}


@pytest.mark.parametrize(
    ("given", "previous", "phase", "written"),
    [
        pytest.param(report(publish=True), RUNNING, Phase.RUNNING, True, id="publish"),
        pytest.param(report(), RUNNING, Phase.RUNNING, False, id="no-budget-keeps-old"),
        pytest.param(report(), RUNNING, Phase.SUCCEEDED, True, id="leaving-running"),
        pytest.param(report(), RUNNING, Phase.RESTARTING, True, id="leaving-to-restart"),
        pytest.param(report(), {"phase": "Pending"}, Phase.RUNNING, False, id="entering"),
        pytest.param(
            report(publish=True, attempt=2), RUNNING, Phase.RUNNING, False, id="older-report"
        ),
        pytest.param(
            report(publish=True, attempt=1),
            {"phase": "Restarting", "attempt": 2},
            Phase.RESTARTING,
            False,
            id="report-of-the-attempt-before",
        ),
        pytest.param(None, RUNNING, Phase.RUNNING, False, id="nothing-read"),
        pytest.param(
            report(publish=True),
            {"phase": "Succeeded", "attempt": 1},
            Phase.SUCCEEDED,
            False,
            id="finished-stays-put",
        ),
    ],
)
def test_published_only_when_allowed(
    given: TrainingReport | None, previous: dict[str, Any], phase: Phase, written: bool
) -> None:
    seen = observed(previous=previous, now=100, training=given)
    outcome = published_progress(seen, phase)
    assert (outcome.status.progress is not None) == written
    if written and given is not None:
        assert outcome.status.progress == job_progress(given)


@pytest.mark.parametrize(
    ("resumed", "shown_before", "events"),
    [
        pytest.param(
            350,
            None,
            [("Normal", "Resumed", "attempt 1 resumed from its checkpoint at step 350")],
            id="first-report-of-a-resumed-attempt",
        ),
        pytest.param(350, 350, [], id="said-once"),
        pytest.param(None, None, [], id="started-fresh"),
    ],
)
def test_a_resumed_attempt_is_an_event(
    resumed: int | None, shown_before: int | None, events: list[tuple[str, str, str]]
) -> None:
    before = {"step": 400, "summary": "step 400", "resumedStep": shown_before}
    previous = {**RUNNING, "progress": {k: v for k, v in before.items() if v is not None}}
    seen = observed(previous=previous, now=100, training=report(publish=True, resumed_step=resumed))
    outcome = published_progress(seen, Phase.RUNNING)
    assert [(e.type, e.reason, e.message) for e in outcome.changes] == events


SHORT_JOB = {"total_steps": 230, "step": 62, "step_seconds": 0.05}  # read once, at 26%
DONE = {"step": 230, "percent": 100, "summary": "100%", "eta": "absent"}
SHOWN = {"step": 62, "totalSteps": 230, "percent": 26, "eta": "8s", "summary": "26%"}


@pytest.mark.parametrize(
    ("given", "phase", "expected"),
    [
        pytest.param(
            report(**SHORT_JOB), Phase.SUCCEEDED,
            DONE, id="succeeded",
        ),
        pytest.param(
            report(**SHORT_JOB), Phase.FAILED,
            {"step": 62, "percent": 26, "summary": "26%", "eta": "absent"},
            id="failed-keeps-its-step",
        ),
        pytest.param(
            None, Phase.SUCCEEDED,
            DONE, id="no-report-at-end",
        ),
        pytest.param(None, Phase.RESTARTING, None, id="no-report-not-ended-stays-put"),
    ],
)  # fmt: skip
def test_an_ended_job_shows_no_estimate_and_a_succeeded_one_all_its_steps(
    given: TrainingReport | None, phase: Phase, expected: dict[str, Any] | None
) -> None:
    previous = {**RUNNING, "progress": SHOWN}
    outcome = published_progress(observed(previous=previous, now=100, training=given), phase)
    if expected is None:
        assert outcome.status.progress is None
        return
    written = outcome.status.as_api()["progress"]
    assert {k: written.get(k, "absent") for k in expected} == expected
    assert "estimatedFinishTime" not in written
    assert status_problems({"progress": written}) == []


def finished_pod(index: int, message: str, attempt: int = 1) -> dict[str, Any]:
    """Replica `index`, Succeeded, its trainer's termination message `message`."""
    done = pod(index, "Succeeded", attempt=attempt, exit_code=0)
    done["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = message
    return done


LEFT = "Progress: step=230 total_steps=230 epoch=9"


@pytest.mark.parametrize(
    ("pods", "phase", "expected"),
    [
        pytest.param(
            [finished_pod(0, LEFT), finished_pod(1, LEFT)], Phase.SUCCEEDED,
            {"step": 230, "totalSteps": 230, "epoch": 9, "percent": 100, "summary": "100%",
             "observedTime": stamp(100)},
            id="succeeded-before-any-read",
        ),
        pytest.param(
            [finished_pod(0, "Progress: step=200 total_steps=230")], Phase.SUCCEEDED,
            {"step": 230, "percent": 100, "summary": "100%", "epoch": "absent"},
            id="succeeded-shows-all-its-steps",
        ),
        pytest.param(
            [finished_pod(0, "Progress: step=57")], Phase.SUCCEEDED,
            {"step": 57, "summary": "step 57", "totalSteps": "absent", "percent": "absent"},
            id="no-total",
        ),
        pytest.param(
            [finished_pod(0, "Progress: step=20 total_steps=230")], Phase.FAILED,
            {"step": 20, "percent": 8, "summary": "8%"},
            id="failed",
        ),
        pytest.param(
            [finished_pod(0, LEFT, attempt=1)], Phase.RUNNING, None, id="not-ended",
        ),
        pytest.param(
            [finished_pod(0, "SetupError: no data"), finished_pod(1, "")], Phase.FAILED, None,
            id="other-messages",
        ),
        pytest.param([], Phase.SUCCEEDED, None, id="no-pods"),
    ],
)  # fmt: skip
def test_a_job_that_ended_before_any_read_shows_what_its_processes_left(
    pods: list[dict[str, Any]], phase: Phase, expected: dict[str, Any] | None
) -> None:
    outcome = published_progress(observed(pods=pods, previous=RUNNING, now=100), phase)
    if expected is None:
        assert outcome.status.progress is None
        return
    written = outcome.status.as_api()["progress"]
    assert {k: written.get(k, "absent") for k in expected} == expected
    assert status_problems({"progress": written}) == []


def test_what_was_shown_comes_before_what_was_left() -> None:
    previous = {**RUNNING, "progress": SHOWN}
    pods = [finished_pod(0, "Progress: step=7 total_steps=9")]
    outcome = published_progress(observed(pods=pods, previous=previous, now=100), Phase.SUCCEEDED)
    assert outcome.status.as_api()["progress"]["totalSteps"] == 230


def test_another_attempts_messages_are_not_read() -> None:
    previous = {**RUNNING, "attempt": 2}
    pods = [finished_pod(0, LEFT, attempt=1)]
    outcome = published_progress(observed(pods=pods, previous=previous, now=100), Phase.SUCCEEDED)
    assert outcome.status.progress is None

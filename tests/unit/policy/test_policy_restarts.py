"""Failures and restarts under spec.runPolicy, one step of the pass (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import Phase
from multigpu_operator.policy.kube.conditions import ConditionChange
from multigpu_operator.policy.step import Outcome, Progress
from multigpu_operator.policy.steps.restarts import failures_and_restarts
from support.policy import elastic_job, job, observed, pod, progress, running

CREATED = {"attempt": 1, "createdAttempt": 1}


def summary(outcome: Outcome) -> dict[str, Any]:
    """What a restart decision comes down to, for comparing in a table."""
    last = outcome.status.as_api().get("lastFailure") or {}
    counters = outcome.progress
    return {
        "stop": outcome.stop,
        "counters": (counters.attempt, counters.restarts) if counters else None,
        "delete": outcome.delete_pods,
        "last": (last.get("pod"), last.get("exitCode"), last.get("attempt")) if last else None,
        "changes": [
            (c.type, c.status, c.reason) for c in outcome.changes if isinstance(c, ConditionChange)
        ],
        "counted": outcome.status.as_api().get("countedFailures"),
    }


def expect(**fields: Any) -> dict[str, Any]:
    nothing: dict[str, Any] = {
        "stop": None,
        "counters": None,
        "delete": (),
        "last": None,
        "changes": [],
        "counted": None,
    }
    return {**nothing, **fields}


RESTART = [("Restarting", True, "PodFailed"), ("Running", False, "Restarting")]


def failed_as(reason: str) -> list[tuple[str, bool, str]]:
    return [("Running", False, reason), ("Restarting", False, reason), ("Failed", True, reason)]


@pytest.mark.parametrize(
    ("j", "pods", "previous", "counters", "expected"),
    [
        pytest.param(job(), running(0, 1), CREATED, progress(), expect(), id="all-running"),
        pytest.param(
            job(),
            [*running(0), pod(1, "Failed", exit_code=137)],
            CREATED,
            progress(),
            expect(
                stop=Phase.RESTARTING,
                counters=(2, 1),
                delete=("job-0", "job-1"),
                last=("job-1", 137, 1),
                changes=RESTART,
            ),
            id="onfailure-replaces-the-whole-attempt",
        ),
        pytest.param(
            job(),
            [pod(0, "Failed", exit_code=1, finished=9), pod(1, "Failed", exit_code=2, finished=5)],
            CREATED,
            progress(),
            expect(
                stop=Phase.RESTARTING,
                counters=(2, 1),
                delete=("job-0", "job-1"),
                last=("job-1", 2, 1),
                changes=RESTART,
            ),
            id="the-first-to-fail-is-the-failure",
        ),
        pytest.param(
            job(runPolicy={"restartPolicy": "Never"}),
            [*running(0), pod(1, "Failed", exit_code=137)],
            CREATED,
            progress(),
            expect(stop=Phase.FAILED, last=("job-1", 137, 1), changes=failed_as("PodFailed")),
            id="never",
        ),
        pytest.param(
            job(runPolicy={"restartPolicy": "ExitCode"}),
            [*running(0), pod(1, "Failed", exit_code=1)],
            CREATED,
            progress(),
            expect(
                stop=Phase.FAILED,
                last=("job-1", 1, 1),
                changes=failed_as("NonRetryableExitCode"),
            ),
            id="exitcode-1-is-not-retried",
        ),
        pytest.param(
            job(runPolicy={"restartPolicy": "ExitCode", "retryableExitCodes": [3]}),
            [*running(0), pod(1, "Failed", exit_code=3)],
            CREATED,
            progress(),
            expect(
                stop=Phase.RESTARTING,
                counters=(2, 1),
                delete=("job-0", "job-1"),
                last=("job-1", 3, 1),
                changes=RESTART,
            ),
            id="exitcode-listed-is-retried",
        ),
        pytest.param(
            job(),
            [*running(0), pod(1, "Failed", exit_code=78)],
            CREATED,
            progress(),
            expect(stop=Phase.FAILED, last=("job-1", 78, 1), changes=failed_as("SetupError")),
            id="a-setup-error-is-not-retried-under-onfailure",
        ),
        pytest.param(
            job(runPolicy={"restartPolicy": "ExitCode", "retryableExitCodes": [78]}),
            [*running(0), pod(1, "Failed", exit_code=78)],
            CREATED,
            progress(),
            expect(
                stop=Phase.RESTARTING,
                counters=(2, 1),
                delete=("job-0", "job-1"),
                last=("job-1", 78, 1),
                changes=RESTART,
            ),
            id="a-setup-error-listed-is-retried",
        ),
        pytest.param(
            job(runPolicy={"backoffLimit": 2}),
            [*running(0, attempt=3), pod(1, "Failed", attempt=3, exit_code=1)],
            {"attempt": 3, "createdAttempt": 3},
            progress(3, restarts=2),
            expect(
                stop=Phase.FAILED,
                last=("job-1", 1, 3),
                changes=failed_as("BackoffLimitExceeded"),
            ),
            id="backoff-limit-used-up",
        ),
        pytest.param(
            job(),
            running(0),
            CREATED,
            progress(),
            expect(
                stop=Phase.RESTARTING,
                counters=(2, 1),
                delete=("job-0",),
                last=("job-1", None, 1),
                changes=RESTART,
            ),
            id="a-pod-lost-from-a-running-attempt",
        ),
        pytest.param(
            job(), running(0), {"attempt": 1}, progress(), expect(), id="a-pod-not-created-yet"
        ),
        pytest.param(
            job(),
            [pod(0, "Failed", exit_code=1), pod(1, "Running")],
            {"attempt": 2},
            progress(2),
            expect(delete=("job-0", "job-1")),
            id="an-older-attempt-is-deleted-not-counted",
        ),
        pytest.param(
            job(),
            running(0, 1, attempt=2),
            {"attempt": 1},
            progress(),
            expect(),
            id="a-newer-attempt-seen-through-a-stale-status-is-left-alone",
        ),
    ],
)
def test_replicated_modes(
    j: Job,
    pods: list[dict[str, Any]],
    previous: dict[str, Any],
    counters: Progress,
    expected: dict[str, Any],
) -> None:
    assert summary(failures_and_restarts(observed(j, pods, previous), counters)) == expected


def failed(index: int, code: int = 137, **fields: Any) -> dict[str, Any]:
    return pod(index, "Failed", exit_code=code, node="gpu-node-0", **fields)


ELASTIC_RESTART = [("Restarting", True, "PodFailed")]


@pytest.mark.parametrize(
    ("j", "pods", "previous", "counters", "expected"),
    [
        pytest.param(
            elastic_job(),
            [*running(0, 2), failed(1)],
            {},
            progress(),
            expect(
                counters=(1, 1),
                delete=("job-1",),
                last=("job-1", 137, 1),
                changes=ELASTIC_RESTART,
                counted=["uid-1-1"],
            ),
            id="replaced-alone-and-counted",
        ),
        pytest.param(
            elastic_job(),
            [*running(0, 2), failed(1)],
            {"countedFailures": ["uid-1-1", "uid-gone"]},
            progress(restarts=1),
            expect(delete=("job-1",), counted=["uid-1-1"]),
            id="seen-again-not-counted-again",
        ),
        pytest.param(
            elastic_job(),
            [*running(0, 2), pod(1, "Failed", disrupted=True)],
            {},
            progress(),
            # Not counted against backoffLimit (restarts stay 0): an infrastructure retry.
            expect(
                counters=(1, 0),
                delete=("job-1",),
                last=("job-1", None, 1),
                changes=[("Restarting", True, "Evicted")],
                counted=["uid-1-1"],
            ),
            id="disrupted-replaced-without-counting",
        ),
        pytest.param(
            elastic_job(runPolicy={"backoffLimit": 1}),
            [*running(0), failed(1, finished=1), failed(2, finished=2)],
            {},
            progress(),
            expect(
                stop=Phase.FAILED,
                counters=(1, 1),
                last=("job-2", 137, 1),
                changes=[*ELASTIC_RESTART, *failed_as("BackoffLimitExceeded")],
            ),
            id="the-second-failure-uses-up-the-limit",
        ),
        pytest.param(
            elastic_job(runPolicy={"restartPolicy": "Never"}),
            [*running(0, 2), failed(1)],
            {},
            progress(),
            expect(stop=Phase.FAILED, last=("job-1", 137, 1), changes=failed_as("PodFailed")),
            id="never",
        ),
    ],
)
def test_elastic(
    j: Job,
    pods: list[dict[str, Any]],
    previous: dict[str, Any],
    counters: Progress,
    expected: dict[str, Any],
) -> None:
    assert summary(failures_and_restarts(observed(j, pods, previous), counters)) == expected


@pytest.mark.parametrize(
    ("j", "pods", "counters", "message"),
    [
        pytest.param(
            job(),
            [*running(0), failed(1)],
            progress(),
            "starting attempt 2 of 4: pod job-1 (replica 1) failed with exit code 137: Error",
            id="restart",
        ),
        pytest.param(
            job(runPolicy={"backoffLimit": 1}),
            [*running(0), failed(1, code=1)],
            progress(restarts=1),
            "1 restarts used up runPolicy.backoffLimit (1); last failure: "
            "pod job-1 (replica 1) failed with exit code 1: Error",
            id="backoff-limit",
        ),
        pytest.param(
            job(runPolicy={"restartPolicy": "ExitCode"}),
            [*running(0), failed(1, code=2)],
            progress(),
            "pod job-1 (replica 1) failed with exit code 2: Error (not retried under ExitCode)",
            id="exit-code",
        ),
        pytest.param(
            elastic_job(),
            [*running(0, 2), failed(1)],
            progress(restarts=1),
            "replacing pod job-1 (replica 1) failed with exit code 137: Error (restart 2 of 3)",
            id="elastic",
        ),
    ],
)
def test_messages_name_the_failure_and_the_count(
    j: Job, pods: list[dict[str, Any]], counters: Progress, message: str
) -> None:
    outcome = failures_and_restarts(observed(j, pods, CREATED), counters)
    messages = {c.message for c in outcome.changes if isinstance(c, ConditionChange)}
    assert messages == {message}

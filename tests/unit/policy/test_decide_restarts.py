"""Phases, failures and restarts through the pure reconcile pass (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from support.lifecycle import JobRun, job_object


def ddp(replicas: int = 2, **spec: Any) -> JobRun:
    return JobRun(job_object(replicas=replicas, gpusPerReplica=2, **spec))


def true_conditions(run: JobRun) -> set[str]:
    return {c["type"] for c in run.status["conditions"] if c["status"] == "True"}


@pytest.mark.parametrize(
    ("phases", "expected_phase", "conditions"),
    [
        pytest.param(["Pending", "Pending"], "Pending", {"Created"}, id="created"),
        pytest.param(["Running", "Pending"], "Pending", {"Created"}, id="partly-running"),
        pytest.param(["Running", "Running"], "Running", {"Created", "Running"}, id="running"),
        pytest.param(["Succeeded", "Running"], "Running", {"Created", "Running"}, id="one-done"),
        pytest.param(["Succeeded", "Succeeded"], "Succeeded", {"Succeeded"}, id="succeeded"),
    ],
)
def test_phase_and_conditions_follow_the_pods(
    phases: list[str], expected_phase: str, conditions: set[str]
) -> None:
    run = ddp()
    run.step()
    run.step()
    for i, phase in enumerate(phases):
        run.set_phase(f"job-{i}", phase, 0 if phase == "Succeeded" else None)
    run.step()
    assert run.status["phase"] == expected_phase
    assert true_conditions(run) >= conditions
    assert run.status["worldSize"] == 4
    assert run.status["selector"] == "multigpu.dev/job-name=job"


def test_a_pass_is_idempotent_and_conditions_keep_their_time() -> None:
    run = ddp()
    run.step()
    run.run_all()
    first = run.step()
    again = run.step(60)
    assert again.events == ()
    assert again.entered is None
    assert again.status.as_api()["conditions"] == first.status.as_api()["conditions"]
    assert again.create_pods == ()
    assert again.delete_pods == ()


def fail_until_done(run: JobRun, exit_codes: list[int]) -> None:
    """Each attempt: all pods run, then rank 1 exits with the next code."""
    run.step()
    for code in exit_codes:
        if run.status["phase"] == "Failed":
            return
        run.run_all()
        run.step()
        run.set_phase("job-1", "Failed", code)
        run.step()  # decides: restart or fail
        run.step()  # old pods gone: the new attempt's pods are created


@pytest.mark.parametrize(
    ("run_policy", "exit_codes", "attempts", "phase", "reason", "message_part"),
    [
        pytest.param(
            {"restartPolicy": "ExitCode"},
            [137, 137, 0],
            3,
            "Running",
            None,
            None,
            id="exitcode-137",
        ),
        pytest.param(
            {"restartPolicy": "ExitCode"},
            [1],
            1,
            "Failed",
            "NonRetryableExitCode",
            "exit code 1",
            id="exitcode-1",
        ),
        pytest.param(
            {"restartPolicy": "ExitCode", "retryableExitCodes": [3]},
            [3, 1],
            2,
            "Failed",
            "NonRetryableExitCode",
            "exit code 1",
            id="exitcode-user-list",
        ),
        pytest.param(
            {"restartPolicy": "OnFailure", "backoffLimit": 2},
            [1, 2, 3, 4],
            3,
            "Failed",
            "BackoffLimitExceeded",
            "exit code 3",
            id="onfailure-backoff-2",
        ),
        pytest.param(
            {"restartPolicy": "Never"}, [137], 1, "Failed", "PodFailed", "exit code 137", id="never"
        ),
    ],
)
def test_restart_policies_count_attempts_exactly(
    run_policy: dict[str, Any],
    exit_codes: list[int],
    attempts: int,
    phase: str,
    reason: str | None,
    message_part: str | None,
) -> None:
    run = ddp(runPolicy=run_policy)
    fail_until_done(run, [c for c in exit_codes if c])
    if phase == "Running":
        run.run_all()
        run.step()
    assert run.status["attempt"] == attempts
    assert run.status["restarts"] == attempts - 1
    assert run.status["phase"] == phase
    if reason and message_part:
        failed = run.condition("Failed")
        assert failed["reason"] == reason
        assert message_part in failed["message"]
        assert run.status["lastFailure"]["exitCode"] == int(message_part.split()[-1])


def test_a_failed_ddp_rank_replaces_every_pod_of_the_attempt() -> None:
    run = ddp(replicas=3)
    run.step()
    run.run_all()
    run.step()
    run.set_phase("job-2", "Failed", 137)
    restart = run.step()
    assert restart.status.as_api()["phase"] == "Restarting"
    assert set(restart.delete_pods) == {"job-0", "job-1", "job-2"}
    assert restart.create_pods == ()  # names are reused only once the old pods are gone
    condition = run.condition("Restarting")
    assert "attempt 2 of 4" in condition["message"]
    assert "job-2 (replica 2) failed with exit code 137" in condition["message"]
    recreate = run.step()
    assert len(recreate.create_pods) == 3
    assert run.attempts() == {"2"}
    run.run_all()
    run.step()
    assert run.status["phase"] == "Running"
    assert run.condition("Restarting")["status"] == "False"
    assert ("Warning", "PodFailed") in run.events()


def test_a_lost_pod_of_a_running_attempt_is_a_retryable_failure() -> None:
    run = ddp()
    run.step()
    run.run_all()
    run.step()
    del run.pods["job-0"]  # its node was deleted: PodGC removed it
    run.step()
    assert run.status["phase"] == "Restarting"
    assert run.status["lastFailure"]["exitCode"] is None
    assert "node lost" in run.condition("Restarting")["message"]


def test_pods_of_a_newer_attempt_seen_through_a_stale_status_are_left_alone() -> None:
    run = ddp()
    run.step()
    stale = dict(run.status)
    run.run_all()
    run.step()
    run.set_phase("job-0", "Failed", 137)
    run.step()
    run.step()
    assert run.attempts() == {"2"}
    run.status = stale  # a pass that still sees attempt 1
    decision = run.step()
    assert decision.delete_pods == ()
    assert decision.create_pods == ()


def elastic(**spec: Any) -> JobRun:
    return JobRun(
        job_object(
            "Elastic",
            replicas=3,
            gpusPerReplica=1,
            elastic={"minReplicas": 2, "maxReplicas": 4},
            **spec,
        )
    )


def test_a_failed_elastic_pod_is_replaced_alone_and_counted_once() -> None:
    run = elastic()
    run.step()
    run.run_all()
    run.step()
    run.set_phase("job-1", "Failed", 137)
    decision = run.step()
    assert decision.delete_pods == ("job-1",)
    assert run.status["restarts"] == 1
    assert run.status["phase"] == "Running"  # two pods still train
    again = run.step()
    assert [p["metadata"]["name"] for p in again.create_pods] == ["job-1"]
    assert run.status["restarts"] == 1
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in run.pods.values()} == {
        "job-0": "Running",
        "job-1": "Pending",
        "job-2": "Running",
    }


def test_elastic_failure_seen_twice_is_counted_once() -> None:
    run = elastic()
    run.step()
    run.run_all()
    run.step()
    run.set_phase("job-2", "Failed", 137)
    failed_pod = run.pods["job-2"]
    run.step()
    run.pods["job-2"] = failed_pod  # the delete has not reached the cache yet
    run.step()
    assert run.status["restarts"] == 1
    assert run.status["countedFailures"] == [failed_pod["metadata"]["uid"]]


def test_elastic_restarts_are_bounded_by_the_backoff_limit() -> None:
    run = elastic(runPolicy={"backoffLimit": 1})
    run.step()
    for expected in ("Running", "Failed"):
        run.run_all()
        run.step()
        run.set_phase("job-0", "Failed", 137)
        run.step()
        run.step()
        assert run.status["phase"] == expected
    assert run.condition("Failed")["reason"] == "BackoffLimitExceeded"


def test_an_elastic_pod_disrupted_with_its_node_is_replaced_without_counting() -> None:
    run = elastic()
    run.step()
    run.run_all()
    run.step()
    run.set_phase("job-0", "Failed")
    run.pods["job-0"]["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}
    ]
    decision = run.step()
    assert decision.delete_pods == ("job-0",)
    assert run.status["restarts"] == 0
    assert run.status["phase"] == "Running"

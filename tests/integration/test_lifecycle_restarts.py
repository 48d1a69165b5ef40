"""Restart policies, whole-attempt and single-pod replacement, on the real control plane.

Failures are injected with the kwok stages: pods annotated sim.multigpu.dev/fail-after
fail with the annotated exit code; annotating a running pod fails it mid-run.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from support.events import list_events
from support.jobs import RUN_LONG, SIM, JobEnv, condition, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for


def fail_with(code: int) -> dict[str, str]:
    return {f"{SIM}/fail-after": "1s", f"{SIM}/exit-code": str(code)}


# The cases of one attempt (ExitCode with a code it does not retry, Never) are
# tests/unit/policy/test_decide_restarts.py's; a real kubelet's exit codes, test_real_pods.py's.
@pytest.mark.parametrize(
    ("run_policy", "exit_code", "attempts", "reason"),
    [
        pytest.param(
            {"restartPolicy": "ExitCode", "backoffLimit": 1},
            137,
            2,
            "BackoffLimitExceeded",
            id="exitcode-137-retried",
        ),
        pytest.param(
            {"restartPolicy": "OnFailure", "backoffLimit": 2},
            1,
            3,
            "BackoffLimitExceeded",
            id="onfailure-backoff-2",
        ),
    ],
)
def test_restart_policy_makes_exactly_the_promised_attempts(
    run_policy: dict[str, Any],
    exit_code: int,
    attempts: int,
    reason: str,
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    jobs.apply(job_manifest("retry", annotations=fail_with(exit_code), runPolicy=run_policy))
    status = jobs.wait_phase("retry", "Failed", timeout=90)
    assert status["attempt"] == attempts
    assert status["restarts"] == attempts - 1
    failed_condition = condition(status, "Failed")
    assert failed_condition["reason"] == reason
    # Bounded: "exit code 1" is in "exit code 137" too.
    assert re.search(rf"\bexit code {exit_code}\b", failed_condition["message"])
    assert status["lastFailure"]["exitCode"] == exit_code
    # The last attempt's failed pods stay (cleanPodPolicy Running), labelled with it.
    pods = jobs.pods("retry")
    assert {p.metadata.labels["multigpu.dev/attempt"] for p in pods} == {str(attempts)}
    # One Warning event per restart and one for the failure (posted in the background).
    wait_for(lambda: len(warnings(jobs, "retry")) >= attempts, f"{attempts} warning events")
    assert len(warnings(jobs, "retry")) == attempts


def warnings(jobs: JobEnv, job: str) -> list[dict[str, Any]]:
    return [
        e
        for e in list_events(jobs.api, jobs.namespace)
        if e["regarding"]["name"] == job and e["type"] == "Warning"
    ]


def test_a_failed_ddp_rank_replaces_every_pod(
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    jobs.apply(job_manifest("ddp", replicas=3, annotations=RUN_LONG))
    first = wait_for(lambda: jobs.running("ddp", 3), "3 pods Running")
    before = {p.metadata.name: p.metadata.uid for p in first}

    jobs.annotate("ddp-1", {**fail_with(137), f"{SIM}/fail-after": "0s"})

    def second_attempt_running() -> bool:
        pods = jobs.running("ddp", 3)
        return bool(pods) and all(p.metadata.labels["multigpu.dev/attempt"] == "2" for p in pods)

    wait_for(second_attempt_running, "attempt 2 running", timeout=60)
    now = {p.metadata.name: p.metadata.uid for p in jobs.pods("ddp")}
    assert set(now) == set(before)
    assert all(now[name] != before[name] for name in before)  # every rank replaced
    status = jobs.wait_phase("ddp", "Running")
    assert (status["attempt"], status["restarts"]) == (2, 1)
    assert status["lastFailure"]["pod"] == "ddp-1"
    assert condition(status, "Restarting")["status"] == "False"


def test_a_failed_elastic_pod_is_replaced_alone(
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    manifest = job_manifest(
        "el",
        mode="Elastic",
        replicas=3,
        annotations=RUN_LONG,
        elastic={"minReplicas": 1, "maxReplicas": 4},
    )
    jobs.apply(manifest)
    first = wait_for(lambda: jobs.running("el", 3), "3 pods Running")
    before = {p.metadata.name: p.metadata.uid for p in first}

    jobs.annotate("el-1", {**fail_with(137), f"{SIM}/fail-after": "0s"})

    def replaced() -> dict[str, str] | None:
        pods = jobs.running("el", 3)
        uids = {p.metadata.name: p.metadata.uid for p in pods}
        return uids if pods and uids["el-1"] != before["el-1"] else None

    after = wait_for(replaced, "el-1 replaced and running", timeout=60)
    assert after["el-0"] == before["el-0"]
    assert after["el-2"] == before["el-2"]
    status = jobs.status("el")
    assert status["restarts"] == 1
    assert status["phase"] == "Running"
    assert status["attempt"] == 1  # the group was not restarted

"""The operator is down while something happens to a job; restarted, it reaches the same
end state as if it had watched all along (and counts nothing twice)."""

from __future__ import annotations

import time

from support.jobs import RUN_LONG, SIM, JobEnv, condition, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for


def test_a_rank_fails_while_the_operator_is_down(operator: OperatorProcess, jobs: JobEnv) -> None:
    jobs.apply(job_manifest("j", replicas=2, annotations=RUN_LONG))
    jobs.wait_phase("j", "Running")
    operator.kill()
    jobs.annotate("j-1", {f"{SIM}/fail-after": "0s", f"{SIM}/exit-code": "137"})
    wait_for(lambda: any(p.status.phase == "Failed" for p in jobs.pods("j")), "j-1 Failed")
    operator.start()

    def second_attempt() -> bool:
        pods = jobs.running("j", 2)
        return bool(pods) and all(p.metadata.labels["multigpu.dev/attempt"] == "2" for p in pods)

    wait_for(second_attempt, "attempt 2 running", timeout=60)
    status = jobs.wait_phase("j", "Running")
    assert (status["attempt"], status["restarts"]) == (2, 1)


def test_suspend_and_resume_while_the_operator_is_down(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    jobs.apply(job_manifest("j", annotations=RUN_LONG))
    jobs.wait_phase("j", "Running")
    for suspend, phase in ((True, "Suspended"), (False, "Running")):
        operator.kill()
        jobs.patch_spec("j", {"suspend": suspend})
        operator.start()
        status = jobs.wait_phase("j", phase)
        if suspend:
            wait_for(lambda: not jobs.pods("j"), "pods deleted")
    assert (status["attempt"], status["restarts"]) == (2, 0)


def test_the_deadline_passes_while_the_operator_is_down(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    jobs.apply(job_manifest("j", annotations=RUN_LONG, runPolicy={"activeDeadlineSeconds": 5}))
    jobs.wait_phase("j", "Running")
    operator.kill()
    time.sleep(6)
    operator.start()
    status = jobs.wait_phase("j", "Failed")
    assert condition(status, "Failed")["reason"] == "DeadlineExceeded"
    wait_for(lambda: not jobs.pods("j"), "pods deleted")


def test_an_elastic_job_is_scaled_while_the_operator_is_down(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    limits = {"minReplicas": 1, "maxReplicas": 4}
    jobs.apply(job_manifest("j", "Elastic", 2, 0, RUN_LONG, elastic=limits))
    wait_for(lambda: jobs.running("j", 2), "2 pods running")
    operator.kill()
    jobs.scale("j", 3)
    operator.start()
    wait_for(lambda: jobs.running("j", 3), "3 pods running")
    wait_for(lambda: jobs.status("j").get("worldSize") == 3, "world size 3")

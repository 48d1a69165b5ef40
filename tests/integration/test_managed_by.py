"""spec.managedBy on the real API server and operator: a job another controller runs gets
nothing from this operator, and the field cannot change once the job exists."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from support.jobs import JobEnv, job_manifest
from support.operator_looks import looked_at
from support.operator_process import OperatorProcess
from support.waiting import wait_for

pytestmark = pytest.mark.cluster


def test_a_job_managed_by_another_controller_gets_no_pods_and_no_status(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    jobs.apply(job_manifest("theirs", managedBy="example.com/other-controller"))
    jobs.apply(job_manifest("ours"))
    wait_for(lambda: len(jobs.pods("ours")) == 2, "our job's pods")
    looked_at(operator, jobs, "theirs")
    assert jobs.pods("theirs") == []
    assert jobs.status("theirs") == {}


def test_managed_by_is_immutable(jobs: JobEnv) -> None:
    jobs.apply(job_manifest("fixed", managedBy="example.com/other-controller"))
    for spec in ({"managedBy": "multigpu.dev/operator"}, {"managedBy": None}):
        with pytest.raises(ApiException) as refused:
            jobs.patch_spec("fixed", spec)
        assert "spec.managedBy is immutable" in str(refused.value.body)
    jobs.apply(job_manifest("unset"))
    with pytest.raises(ApiException) as refused:
        jobs.patch_spec("unset", {"managedBy": "example.com/other-controller"})
    assert "spec.managedBy is immutable" in str(refused.value.body)

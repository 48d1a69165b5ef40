"""spec.managedBy on the real API server: the field cannot change once the job exists (a
CEL rule of the CRD). That a job another controller runs gets nothing from this operator is
tests/unit/controller/test_controller_kueue.py's."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from support.jobs import JobEnv, job_manifest

pytestmark = pytest.mark.cluster


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

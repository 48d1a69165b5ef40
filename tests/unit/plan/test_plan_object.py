"""A stored job is read, not validated again (reconcile.plan_object): the API server
validated it. One kept from before a stricter CRD (validation ratcheting) that the
models or the planner cannot take fails the job (InvalidSpec) naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.rules import MSG_DATA_PARALLEL_REPLICAS, MSG_ELASTIC_REQUIRED
from multigpu_operator.reconcile import plan_object

TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "busybox:1.36"}]}}


def stored(**spec: Any) -> dict[str, Any]:
    meta = {"name": "j", "namespace": "ns", "uid": "uid-j", "generation": 1}
    return {"metadata": meta, "spec": {"template": TEMPLATE, **spec}}


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        pytest.param(
            {"mode": "Foo"},
            "spec.mode: Input should be 'DataParallel', 'DistributedDataParallel', "
            "'ModelParallel' or 'Elastic'",
            id="unknown-mode",
        ),
        pytest.param(
            {"mode": "DistributedDataParallel", "replicas": 10**7},
            "spec.replicas: Input should be less than or equal to 5000",
            id="above-a-bound",
        ),
        pytest.param(
            {"mode": "Elastic", "replicas": 2, "elastic": {"minReplicas": 0, "maxReplicas": 2}},
            "spec.elastic.minReplicas: Input should be greater than or equal to 1",
            id="nested",
        ),
        pytest.param(
            {"mode": "DataParallel", "replicas": 2},
            f"spec.replicas: {MSG_DATA_PARALLEL_REPLICAS}",
            id="cel-rule-data-parallel",
        ),
        pytest.param(
            {"mode": "Elastic", "replicas": 2},
            f"spec.elastic: {MSG_ELASTIC_REQUIRED}",
            id="cel-rule-elastic",
        ),
    ],
)
def test_a_stored_job_that_cannot_be_read_names_the_field(spec: dict[str, Any], why: str) -> None:
    assert plan_object(stored(**spec)) == why


def test_a_valid_stored_job_is_planned() -> None:
    planned = plan_object(stored(mode="DistributedDataParallel", replicas=2))
    assert not isinstance(planned, str)
    assert len(planned[1].pods) == 2

"""The planner's errors name the field and the fix; same job, same bytes."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

import pytest

from multigpu_operator.api import names
from multigpu_operator.api.limits import MAX_REPLICAS
from multigpu_operator.api.spec import MAX_NAME_LENGTH, Job
from multigpu_operator.api.validation import validate
from multigpu_operator.plan import DesiredState, PlanError, plan_job
from support.planning import (
    container,
    elastic,
    job,
    template,
)

C = "spec.template.spec.containers[trainer]"


@pytest.mark.parametrize(
    ("j", "field"),
    [
        pytest.param(
            job(tmpl=template(container(env=[{"name": "WORLD_SIZE", "value": "2"}]))),
            f"{C}.env[WORLD_SIZE]",
            id="env-world-size",
        ),
        pytest.param(
            job(
                gpusPerReplica=0, tmpl=template(container(env=[{"name": "NVIDIA_VISIBLE_DEVICES"}]))
            ),
            f"{C}.env[NVIDIA_VISIBLE_DEVICES]",
            id="env-visible-devices-on-cpu",
        ),
        pytest.param(
            elastic(tmpl=template(container(env=[{"name": "PET_NNODES", "value": "2"}]))),
            f"{C}.env[PET_NNODES]",
            id="env-pet-nnodes-elastic",
        ),
        pytest.param(
            job(tmpl=template(hostname="mine")),
            "spec.template.spec.hostname",
            id="hostname",
        ),
        pytest.param(
            job(tmpl=template(subdomain="other")),
            "spec.template.spec.subdomain",
            id="subdomain",
        ),
        pytest.param(
            job(tmpl=template(restartPolicy="OnFailure")),
            "spec.template.spec.restartPolicy",
            id="restart-policy",
        ),
        pytest.param(
            job(
                gpusPerReplica=2,
                tmpl=template(container(resources={"limits": {"nvidia.com/gpu": 1}})),
            ),
            f"{C}.resources.limits[nvidia.com/gpu]",
            id="gpu-limit",
        ),
        pytest.param(
            job(
                gpusPerReplica=2,
                tmpl=template(container(resources={"requests": {"nvidia.com/gpu": "4"}})),
            ),
            f"{C}.resources.requests[nvidia.com/gpu]",
            id="gpu-request",
        ),
        pytest.param(
            job(
                gpusPerReplica=0,
                tmpl=template(container(resources={"limits": {"nvidia.com/gpu": "1"}})),
            ),
            f"{C}.resources.limits[nvidia.com/gpu]",
            id="gpu-limit-on-cpu-job",
        ),
        pytest.param(
            job(
                gpuProduct="NVIDIA-H100-80GB-HBM3",
                tmpl=template(nodeSelector={"nvidia.com/gpu.product": "A100"}),
            ),
            "spec.template.spec.nodeSelector[nvidia.com/gpu.product]",
            id="gpu-product-selector",
        ),
        pytest.param(
            job(tmpl=template(container(volumeMounts=[{"name": "x", "mountPath": "/dev/shm/"}]))),
            f"{C}.volumeMounts[/dev/shm]",
            id="shm-mount",
        ),
        pytest.param(
            job(tmpl=template(volumes=[{"name": "mgj-shm", "emptyDir": {}}])),
            "spec.template.spec.volumes[mgj-shm]",
            id="shm-volume-name",
        ),
        pytest.param(
            job(tmpl={**template(), "metadata": {"labels": {names.LABEL_JOB_NAME: "other"}}}),
            f"spec.template.metadata.labels[{names.LABEL_JOB_NAME}]",
            id="label",
        ),
        pytest.param(
            job(tmpl={**template(), "metadata": {"name": "pinned"}}),
            "spec.template.metadata.name",
            id="template-name",
        ),
    ],
)
def test_conflicts_name_the_field(j: Job, field: str) -> None:
    with pytest.raises(PlanError) as err:
        plan_job(j)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_every_conflict_is_reported_at_once() -> None:
    j = job(
        replicas=3,
        gpusPerReplica=2,
        tmpl=template(
            container(
                env=[{"name": "WORLD_SIZE", "value": "6"}],
                resources={"limits": {"nvidia.com/gpu": 1}},
            ),
            hostname="mine",
            volumes=[{"name": "mgj-shm", "emptyDir": {}}],
        ),
    )
    with pytest.raises(PlanError) as err:
        plan_job(j)
    fields = [c.field for c in err.value.conflicts]
    # In the order found; the same field of each of the 3 pods is one conflict.
    assert fields == [
        "spec.template.spec.hostname",
        f"{C}.env[WORLD_SIZE]",
        f"{C}.resources.limits[nvidia.com/gpu]",
        "spec.template.spec.volumes[mgj-shm]",
    ]
    # One text for the job's condition and events, each conflict with its fix.
    assert str(err.value) == "; ".join(str(c) for c in err.value.conflicts)
    assert err.value.field == fields[0]


def test_a_template_of_the_wrong_shape_is_a_conflict_too() -> None:
    j = job(tmpl=template(container(env="WORLD_SIZE=2", resources=[]), tolerations={}))
    with pytest.raises(PlanError) as err:
        plan_job(j)
    assert [str(c) for c in err.value.conflicts] == [
        f"{C}.env: must be a list, not str",
        f"{C}.resources: must be an object, not list",
        "spec.template.spec.tolerations: must be a list, not dict",
    ]


def test_conflicting_env_says_the_operator_sets_it() -> None:
    j = job(tmpl=template(container(env=[{"name": "MASTER_ADDR", "value": "x"}])))
    with pytest.raises(PlanError, match=r"env\[MASTER_ADDR\]: is set by the operator .*remove it"):
        plan_job(j)


def test_shm_conflict_says_how_to_fix_it() -> None:
    j = job(tmpl=template(container(volumeMounts=[{"name": "x", "mountPath": "/dev/shm"}])))
    with pytest.raises(PlanError, match=r'remove this mount or set spec.shmSize to "0"'):
        plan_job(j)


def test_elastic_override_outside_range_is_an_error() -> None:
    with pytest.raises(PlanError, match=r"^spec.replicas: is 5, outside spec.elastic \[1, 4\]"):
        plan_job(elastic(), replicas=5)


def test_pod_hostnames_fit_in_a_dns_label() -> None:
    # The name rules leave room for the index of the last pod spec.replicas allows, so the
    # planner has nothing to check (a bigger spec.replicas is refused by the API server).
    assert len(names.pod_name("a" * MAX_NAME_LENGTH, MAX_REPLICAS - 1)) <= 63
    assert any(
        p.field == "spec.replicas" and "greater than the maximum" in p.message
        for p in validate({"mode": "DataParallel", "replicas": 10**7, "template": template()})
    )


def test_plan_error_is_a_value_error() -> None:
    err = PlanError("spec.replicas", "is 0")
    assert isinstance(err, ValueError)
    assert str(err) == "spec.replicas: is 0"


# --- determinism --------------------------------------------------------------------------


def dump(state: DesiredState) -> str:
    return json.dumps([state.service, list(state.pods), state.world_size])


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: job(replicas=3, gpusPerReplica=2), id="ddp"),
        pytest.param(lambda: job("ModelParallel", gpusPerReplica=2), id="model-parallel"),
        pytest.param(elastic, id="elastic"),
    ],
)
def test_same_job_same_bytes(build: Callable[[], Job]) -> None:
    first = build()
    before = copy.deepcopy(dict(first.spec.template))
    assert dump(plan_job(first)) == dump(plan_job(first)) == dump(plan_job(build()))
    # The job itself is not modified.
    assert dict(first.spec.template) == before

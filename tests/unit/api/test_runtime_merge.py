"""The merge of a job with its runtime (api/runtime_merge.py), one table per rule: scalars,
objects, the pod template's strategic merge, Kueue labels, locked fields, and the merged
job's validation."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.kueue import QUEUE_NAME_LABEL
from multigpu_operator.api.runtime_merge import RuntimeProblems, merge_job, merged_job
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import Job
from multigpu_operator.api.validation import with_defaults
from multigpu_operator.plan import PlanError, plan_job

RUNTIME = "ClusterMultiGPURuntime gpu-ddp"
REF = {"name": "gpu-ddp"}


def trainer(**fields: Any) -> dict[str, Any]:
    return {"name": "trainer", **fields}


def template(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers), **spec}}


BASE = {"mode": "DistributedDataParallel", "template": template(trainer(image="reg/pt:1"))}


def job(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A job as the API server stores it: its defaults filled in."""
    meta: dict[str, Any] = {"name": "j", "namespace": "ns"}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": with_defaults(spec_schema(), {"runtimeRef": REF, **spec})}


def merged(spec: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = merge_job(job(spec), {**BASE, **runtime}, RUNTIME)["spec"]
    return out


# (id, the job's spec, the runtime's spec over BASE, a field of the merged spec, its value)
SCALARS = [
    ("left-out-takes-runtime", {}, {"mode": "Elastic"}, "mode", "Elastic"),
    ("job-wins", {"replicas": 4}, {"replicas": 2}, "replicas", 4),
    ("job-at-default-takes-runtime", {"replicas": 1}, {"replicas": 2}, "replicas", 2),
    ("job-launcher-wins", {"launcher": "Script"}, {"launcher": "Torchrun"}, "launcher", "Script"),
    ("runtime-silent-keeps-default", {}, {}, "masterPort", 29500),
    ("runtime-port", {}, {"masterPort": 23456}, "masterPort", 23456),
    ("explicit-null-wins", {"shmSize": None}, {"shmSize": "8Gi"}, "shmSize", None),
    ("ref-kept", {}, {}, "runtimeRef", {"kind": "ClusterMultiGPURuntime", "name": "gpu-ddp"}),
]


@pytest.mark.parametrize(("own", "runtime", "field", "value"), [c[1:] for c in SCALARS],
                         ids=[c[0] for c in SCALARS])  # fmt: skip
def test_scalars(own: dict[str, Any], runtime: dict[str, Any], field: str, value: Any) -> None:
    assert merged(own, runtime)[field] == value


RULE_A = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}
RULE_B = {"action": "Ignore", "onReasons": ["OOMKilled"]}

# (id, the job's spec, the runtime's, the object's path, fields of the merged object)
OBJECTS = [
    (
        "field-by-field",
        {"runPolicy": {"backoffLimit": 5}},
        {"runPolicy": {"activeDeadlineSeconds": 100}},
        ("runPolicy",),
        {"backoffLimit": 5, "activeDeadlineSeconds": 100},
    ),
    (
        "sub-field-at-default-takes-runtime",
        {},
        {"runPolicy": {"backoffLimit": 10}},
        ("runPolicy",),
        {"backoffLimit": 10},
    ),
    (
        "job-list-replaces",
        {"runPolicy": {"failurePolicy": {"rules": [RULE_A]}}},
        {"runPolicy": {"failurePolicy": {"rules": [RULE_B]}}},
        ("runPolicy", "failurePolicy"),
        {"rules": [RULE_A]},
    ),
    (
        "no-job-list-takes-runtime",
        {},
        {"runPolicy": {"failurePolicy": {"rules": [RULE_B]}}},
        ("runPolicy", "failurePolicy"),
        {"rules": [RULE_B]},
    ),
    (
        "object-only-in-runtime",
        {},
        {"mode": "Elastic", "elastic": {"minReplicas": 1, "maxReplicas": 4}},
        ("elastic",),
        {"minReplicas": 1, "maxReplicas": 4},
    ),
]


@pytest.mark.parametrize(("own", "runtime", "path", "fields"), [c[1:] for c in OBJECTS],
                         ids=[c[0] for c in OBJECTS])  # fmt: skip
def test_objects(
    own: dict[str, Any], runtime: dict[str, Any], path: tuple[str, ...], fields: dict[str, Any]
) -> None:
    value = merged(own, runtime)
    for part in path:
        value = value[part]
    assert {f: value.get(f) for f in fields} == fields


def env(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "value": v} for n, v in pairs]


# (id, the job's template, the runtime's template, the merged template)
TEMPLATES = [
    (
        "containers-by-name",
        template(trainer(command=["python", "train.py"])),
        template(trainer(image="reg/pt:1", env=env(("A", "1")))),
        template(trainer(image="reg/pt:1", env=env(("A", "1")), command=["python", "train.py"])),
    ),
    (
        "env-by-name-runtime-order-then-new",
        template(trainer(env=env(("C", "3"), ("A", "9")))),
        template(trainer(env=env(("A", "1"), ("B", "2")))),
        template(trainer(env=env(("A", "9"), ("B", "2"), ("C", "3")))),
    ),
    (
        "new-container-appended",
        template({"name": "sidecar", "image": "s"}),
        template(trainer(image="reg/pt:1")),
        template(trainer(image="reg/pt:1"), {"name": "sidecar", "image": "s"}),
    ),
    (
        "volumes-by-name-mounts-by-path",
        template(
            trainer(volumeMounts=[{"name": "d2", "mountPath": "/data"}]),
            volumes=[{"name": "d2", "emptyDir": {}}],
        ),
        template(
            trainer(volumeMounts=[{"name": "d1", "mountPath": "/data", "readOnly": True}]),
            volumes=[{"name": "d1", "emptyDir": {}}],
        ),
        template(
            trainer(volumeMounts=[{"name": "d2", "mountPath": "/data", "readOnly": True}]),
            volumes=[{"name": "d1", "emptyDir": {}}, {"name": "d2", "emptyDir": {}}],
        ),
    ),
    (
        "ports-by-container-port",
        template(trainer(ports=[{"containerPort": 8080, "name": "web"}])),
        template(trainer(ports=[{"containerPort": 8080, "protocol": "TCP"}])),
        template(trainer(ports=[{"containerPort": 8080, "protocol": "TCP", "name": "web"}])),
    ),
    (
        "command-and-args-replaced",
        template(trainer(args=["--b"])),
        template(trainer(command=["torchrun"], args=["--a", "x"])),
        template(trainer(command=["torchrun"], args=["--b"])),
    ),
    (
        "tolerations-replaced",
        template(trainer(), tolerations=[{"key": "b", "operator": "Exists"}]),
        template(trainer(), tolerations=[{"key": "a", "operator": "Exists"}]),
        template(trainer(), tolerations=[{"key": "b", "operator": "Exists"}]),
    ),
    (
        "maps-merge-key-by-key",
        template(trainer(resources={"limits": {"cpu": "4"}}), nodeSelector={"b": "2"}),
        template(
            trainer(resources={"limits": {"cpu": "1", "memory": "8Gi"}}), nodeSelector={"a": "1"}
        ),
        template(
            trainer(resources={"limits": {"cpu": "4", "memory": "8Gi"}}),
            nodeSelector={"a": "1", "b": "2"},
        ),
    ),
    (
        "metadata-labels-merge",
        {"metadata": {"labels": {"team": "b"}}, **template(trainer())},
        {"metadata": {"labels": {"team": "a", "tier": "x"}}, **template(trainer())},
        {"metadata": {"labels": {"team": "b", "tier": "x"}}, **template(trainer())},
    ),
]


@pytest.mark.parametrize(("own", "runtime", "expected"), [c[1:] for c in TEMPLATES],
                         ids=[c[0] for c in TEMPLATES])  # fmt: skip
def test_template_merges_as_a_strategic_merge_patch(
    own: dict[str, Any], runtime: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert merged({"template": own}, {"template": runtime})["template"] == expected


def test_the_runtime_template_alone_when_the_job_has_none() -> None:
    assert merged({}, {})["template"] == BASE["template"]


@pytest.mark.parametrize(
    ("labels", "runtime", "expected"),
    [
        ({}, {"queueName": "team-a"}, "team-a"),
        ({QUEUE_NAME_LABEL: "mine"}, {"queueName": "team-a"}, "mine"),
        ({}, {}, None),
    ],
)
def test_the_queue_becomes_the_jobs_label_unless_it_has_one(
    labels: dict[str, str], runtime: dict[str, Any], expected: str | None
) -> None:
    out = merge_job(job({}, labels), {**BASE, **runtime}, RUNTIME)
    assert (out["metadata"].get("labels") or {}).get(QUEUE_NAME_LABEL) == expected
    assert "queueName" not in out["spec"]


IMAGE = "template.spec.containers[trainer].image"

# (id, the job's spec, its labels, the runtime's locked fields, the field named or None)
LOCKED = [
    ("image-changed", {"template": template(trainer(image="other/pt:1"))}, {}, [IMAGE],
     f"spec.{IMAGE}"),
    ("image-same", {"template": template(trainer(image="reg/pt:1"))}, {}, [IMAGE], None),
    ("image-left-out", {"template": template(trainer(command=["x"]))}, {}, [IMAGE], None),
    ("no-template", {}, {}, [IMAGE], None),
    ("queue-changed", {}, {QUEUE_NAME_LABEL: "mine"}, ["queueName"],
     f"metadata.labels[{QUEUE_NAME_LABEL}]"),
    ("queue-same", {}, {QUEUE_NAME_LABEL: "team-a"}, ["queueName"], None),
    ("backoff-at-default", {}, {}, ["runPolicy.backoffLimit"], None),
    ("backoff-changed", {"runPolicy": {"backoffLimit": 7}}, {}, ["runPolicy.backoffLimit"],
     "spec.runPolicy.backoffLimit"),
    ("not-locked", {"runPolicy": {"backoffLimit": 7}}, {}, [IMAGE], None),
]  # fmt: skip


@pytest.mark.parametrize(("own", "labels", "locked", "field"), [c[1:] for c in LOCKED],
                         ids=[c[0] for c in LOCKED])  # fmt: skip
def test_locked_fields(
    own: dict[str, Any], labels: dict[str, str], locked: list[str], field: str | None
) -> None:
    runtime = {**BASE, "queueName": "team-a", "lockedFields": locked}
    if field is None:
        merge_job(job(own, labels), runtime, RUNTIME)
        return
    with pytest.raises(RuntimeProblems) as refused:
        merge_job(job(own, labels), runtime, RUNTIME)
    (problem,) = refused.value.problems
    assert problem.field == field
    assert f"is locked by {RUNTIME}" in problem.message


@pytest.mark.parametrize(
    ("own", "runtime", "field"),
    [
        ({"replicas": 2}, {"mode": "DataParallel"}, "spec.replicas"),
        ({}, {"mode": None}, "spec.mode"),
        ({"launcher": "Script", "gpusPerReplica": 2, "replicas": 2}, {}, "spec.launcher"),
    ],
)
def test_a_merged_job_that_is_not_valid_names_the_field(
    own: dict[str, Any], runtime: dict[str, Any], field: str
) -> None:
    blueprint = {k: v for k, v in {**BASE, **runtime}.items() if v is not None}
    with pytest.raises(RuntimeProblems) as refused:
        merged_job(job(own), blueprint, RUNTIME)
    assert field in [p.field for p in refused.value.problems]
    assert all(RUNTIME in p.message for p in refused.value.problems)


def test_a_valid_merge_is_the_job_as_it_runs() -> None:
    out = merged_job(job({"replicas": 2}), {**BASE, "gpusPerReplica": 4}, RUNTIME)
    assert (out["spec"]["mode"], out["spec"]["replicas"], out["spec"]["gpusPerReplica"]) == (
        "DistributedDataParallel",
        2,
        4,
    )


def test_a_runtime_env_the_operator_sets_conflicts_naming_the_field() -> None:
    """The merged job meets the planner's env contract as any job does (docs/env-contract.md)."""
    runtime = {**BASE, "template": template(trainer(image="reg/pt:1", env=env(("RANK", "3"))))}
    out = merged_job(job({"replicas": 2}), runtime, RUNTIME)
    with pytest.raises(PlanError) as conflict:
        plan_job(Job.from_object(out))
    (found,) = conflict.value.conflicts
    assert found.field == "spec.template.spec.containers[trainer].env[RANK]"

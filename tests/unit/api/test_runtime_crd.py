"""The runtimes' CRDs (MultiGPURuntime, ClusterMultiGPURuntime), generated from the job's
declaration, and spec.runtimeRef in the job's CRD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from multigpu_operator.api.gen import CHART_CRD_PATH, CRD_PATH, main
from multigpu_operator.api.runtime import (
    CLUSTER_RUNTIME_KIND,
    RUNTIME_KIND,
    MultiGPURuntime,
    RuntimeSpec,
)
from multigpu_operator.api.runtime_crd import (
    RUNTIME_CRDS,
    cluster_runtime_crd,
    crd_yaml,
    runtime_crd,
)
from multigpu_operator.api.runtime_ref import MSG_MODE_REQUIRED, MSG_TEMPLATE_REQUIRED
from multigpu_operator.api.spec import JobSpec
from multigpu_operator.api.validation import validate
from support.crd_specs import spec

REPO = Path(__file__).resolve().parents[3]
REF = {"name": "gpu-ddp"}


def test_both_copies_of_each_runtime_crd_are_generated(tmp_path: Path) -> None:
    for directory in (CRD_PATH.parent, CHART_CRD_PATH.parent):
        for name, build in RUNTIME_CRDS.items():
            assert (REPO / directory / name).read_text() == crd_yaml(build()), (
                f"{directory / name} is stale: run `python -m multigpu_operator.api.gen`"
            )
    (tmp_path / "manifests").mkdir()
    assert main(["--root", str(tmp_path)]) == 0
    for name in RUNTIME_CRDS:
        assert (tmp_path / CHART_CRD_PATH.parent / name).exists()


def test_the_kustomize_base_lists_the_runtime_crds() -> None:
    listed = (REPO / CRD_PATH.parent / "kustomization.yaml").read_text()
    for name in RUNTIME_CRDS:
        assert name in listed


def test_scopes_names_and_columns() -> None:
    namespaced, cluster = runtime_crd()["spec"], cluster_runtime_crd()["spec"]
    assert (namespaced["scope"], namespaced["names"]["kind"]) == ("Namespaced", RUNTIME_KIND)
    assert (cluster["scope"], cluster["names"]["kind"]) == ("Cluster", CLUSTER_RUNTIME_KIND)
    columns = [c["name"] for c in namespaced["versions"][0]["additionalPrinterColumns"]]
    assert columns[:3] == ["Mode", "Launcher", "GPUs/Replica"]


def test_a_runtime_holds_every_field_a_job_sets_without_server_defaults() -> None:
    job_only = {"managedBy", "suspend", "runtimeRef"}
    job_fields = {f.alias or n for n, f in JobSpec.model_fields.items()}
    schema = runtime_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    runtime_spec = schema["properties"]["spec"]
    assert set(runtime_spec["properties"]) >= {"queueName", "lockedFields"} | (
        {_camel(f) for f in job_fields} - job_only
    )
    assert not {"managedBy", "suspend", "runtimeRef"} & set(runtime_spec["properties"])
    assert "required" not in runtime_spec
    assert all("default" not in p for p in runtime_spec["properties"].values())
    # Bounds are the job's.
    assert runtime_spec["properties"]["replicas"]["maximum"] == 5000
    assert all(p.get("description") for p in runtime_spec["properties"].values())


def test_a_runtime_reads_as_a_typed_model() -> None:
    runtime = MultiGPURuntime.model_validate(
        {"spec": {"mode": "Elastic", "lockedFields": ["queueName"], "queueName": "team-a"}}
    )
    spec_: Any = runtime.spec
    assert isinstance(spec_, RuntimeSpec)
    assert (spec_.queue_name, spec_.locked_fields) == ("team-a", ["queueName"])
    with pytest.raises(ValueError, match="lockedFields"):
        MultiGPURuntime.model_validate({"spec": {"lockedFields": ["template..image"]}})


@pytest.mark.parametrize(
    ("raw", "problems"),
    [
        ({"runtimeRef": REF}, []),
        ({"runtimeRef": REF, "replicas": 4}, []),
        # The cross-field rules wait for the merge: this one needs the runtime's mode.
        ({"runtimeRef": REF, "replicas": 4, "launcher": "Script", "gpusPerReplica": 2}, []),
        ({}, [("spec.mode", MSG_MODE_REQUIRED), ("spec.template", MSG_TEMPLATE_REQUIRED)]),
        ({"template": spec()["template"]}, [("spec.mode", MSG_MODE_REQUIRED)]),
        (
            {"runtimeRef": {"kind": "TrainingRuntime", "name": "x"}},
            [("spec.runtimeRef.kind", "'TrainingRuntime' is not one of")],
        ),
        ({"runtimeRef": {"name": ""}}, [("spec.runtimeRef.name", "")]),
    ],
)
def test_a_job_with_a_runtime_ref_may_leave_out_what_the_runtime_supplies(
    raw: dict[str, Any], problems: list[tuple[str, str]]
) -> None:
    found = validate(raw)
    assert [p.field for p in found] == [f for f, _ in problems]
    for problem, (_, message) in zip(found, problems, strict=True):
        assert message in problem.message


def test_a_job_without_a_runtime_ref_keeps_every_rule() -> None:
    (problem,) = validate(spec(mode="DataParallel", replicas=2))
    assert problem.field == "spec.replicas"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)

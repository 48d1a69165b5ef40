"""The chart's default runtimes (values `runtimes`) and the ClusterRole that lets users
read runtimes: rendered with `helm template`, each runtime valid against the runtime CRD
generated from api/, and a ten-line job that names one valid once merged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator

from cluster.tools import Tools, build_tools
from multigpu_operator.api.runtime_crd import cluster_runtime_crd
from multigpu_operator.api.runtime_merge import merged_job
from support.chart import Manifest, find, render

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples/runtimes/ddp.yaml"
DEFAULTS = {"cpu-ddp", "gpu-ddp", "elastic"}
# What users may do with runtimes: read them.
READ = ["get", "list", "watch"]


@pytest.fixture(scope="module")
def tools() -> Tools:
    return build_tools("helm", only=True)


@pytest.fixture(scope="module")
def default(tools: Tools) -> list[Manifest]:
    return render(tools)


def runtimes(objects: list[Manifest]) -> dict[str, Manifest]:
    return {r["metadata"]["name"]: r for r in find(objects, "ClusterMultiGPURuntime")}


def test_the_default_runtimes_are_valid_runtimes(default: list[Manifest]) -> None:
    shipped = runtimes(default)
    assert set(shipped) == DEFAULTS
    schema = cluster_runtime_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for runtime in shipped.values():
        errors = [e.message for e in OAS30Validator(schema).iter_errors(runtime)]
        assert errors == [], runtime["metadata"]["name"]
    assert {r["spec"]["mode"] for r in shipped.values()} == {"DistributedDataParallel", "Elastic"}
    assert shipped["cpu-ddp"]["spec"]["gpusPerReplica"] == 0


def test_they_are_switched_off_by_a_value_and_take_the_image_and_queue(tools: Tools) -> None:
    assert runtimes(render(tools, "--set", "runtimes.defaultEnabled=false")) == {}
    shipped = runtimes(
        render(tools, "--set", "runtimes.image=reg/trainer:9", "--set", "runtimes.queueName=q")
    )
    for runtime in shipped.values():
        assert runtime["spec"]["queueName"] == "q"
        assert runtime["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/trainer:9"


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_the_ten_line_example_is_a_valid_job_with_each(default: list[Manifest], name: str) -> None:
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    assert len(EXAMPLE.read_text().splitlines()) <= 14
    job["spec"]["runtimeRef"] = {"name": name}
    merged = merged_job(job, runtimes(default)[name]["spec"], f"ClusterMultiGPURuntime {name}")
    assert merged["spec"]["template"]["spec"]["containers"][0]["args"]


def test_users_read_runtimes_through_the_built_in_roles(default: list[Manifest]) -> None:
    (reader,) = (r for r in find(default, "ClusterRole") if "runtime-reader" in str(r))
    labels = reader["metadata"]["labels"]
    for role in ("view", "edit", "admin"):
        assert labels[f"rbac.authorization.k8s.io/aggregate-to-{role}"] == "true"
    base = yaml.safe_load((REPO / "manifests/rbac/runtime_reader_cluster_role.yaml").read_text())
    assert reader["rules"] == base["rules"]
    assert reader["rules"] == [
        {
            "apiGroups": ["multigpu.dev"],
            "resources": ["multigpuruntimes", "clustermultigpuruntimes"],
            "verbs": READ,
        }
    ]

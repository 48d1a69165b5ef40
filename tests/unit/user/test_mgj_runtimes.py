"""`mgj render`, `mgj run --local` and `mgj get/describe` with runtimes: a runtime from the
job's own file or directory, from --runtimes, or from the cluster (the operator's
in-memory API server here); a runtime nobody has, or a merge that breaks a rule or a
locked field, is an error naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator import cli
from multigpu_operator.cli.render import render
from multigpu_operator.cli.runtimes import finder
from multigpu_operator.cluster.kinds import CLUSTER_RUNTIMES, JOBS
from support.client_jobs import NAMESPACE, user_cluster
from support.fake_cluster import FakeCluster

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples/runtimes/ddp.yaml"
IMAGE = "reg/trainer:1"


def runtime(name: str = "cpu-ddp", **spec: Any) -> dict[str, Any]:
    container = {"name": "trainer", "image": IMAGE, "command": ["torchrun", "-m", "x"]}
    return {
        "apiVersion": "multigpu.dev/v1alpha1",
        "kind": "ClusterMultiGPURuntime",
        "metadata": {"name": name},
        "spec": {
            "mode": "DistributedDataParallel",
            "gpusPerReplica": 0,
            "template": {"spec": {"containers": [container]}},
            **spec,
        },
    }


def example() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return job


def trainers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o["spec"]["containers"][0] for o in objects if o["kind"] == "Pod"]


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    return user_cluster(tmp_path, monkeypatch)


def mgj(fake: FakeCluster, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv), cluster=fake)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_ten_line_example_renders_merged_with_its_runtime() -> None:
    objects, errors = render([example()], "ns", runtimes=finder([runtime()], None, False))
    assert errors == []
    (first, second) = trainers(objects)
    assert (first["image"], first["command"], first["args"]) == (
        IMAGE,
        ["torchrun", "-m", "x"],
        ["--epochs", "2"],
    )
    assert second["image"] == IMAGE


@pytest.mark.parametrize(
    ("runtime_spec", "job_spec", "expected"),
    [
        ({}, {"runtimeRef": {"name": "nope"}}, "spec.runtimeRef: ClusterMultiGPURuntime nope"),
        ({"mode": "DataParallel"}, {}, "spec.replicas: spec.replicas must be 1"),
        (
            {"lockedFields": ["template.spec.containers[trainer].image"]},
            {"template": {"spec": {"containers": [{"name": "trainer", "image": "evil:1"}]}}},
            "spec.template.spec.containers[trainer].image: ",
        ),
    ],
)
def test_what_is_wrong_names_the_field(
    runtime_spec: dict[str, Any], job_spec: dict[str, Any], expected: str
) -> None:
    job = example()
    job["spec"].update(job_spec)
    found = finder([runtime(**runtime_spec)], None, ask_cluster=False)
    objects, errors = render([job], "ns", runtimes=found)
    assert objects == []
    assert any(e.startswith(f"runtime-ddp: {expected}") for e in errors), errors


def test_render_reads_the_runtime_beside_the_job_or_given(
    fake: FakeCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "together"
    folder.mkdir()
    (folder / "job.yaml").write_text(EXAMPLE.read_text())
    (folder / "runtime.yaml").write_text(yaml.safe_dump(runtime()))
    code, out, err = mgj(fake, capsys, "render", str(folder))
    assert (code, err) == (0, "")
    assert f"image: {IMAGE}" in out
    code, out, err = mgj(
        fake, capsys, "render", str(EXAMPLE), "--runtimes", str(folder / "runtime.yaml")
    )
    assert (code, err) == (0, "")
    assert f"image: {IMAGE}" in out
    assert not fake.calls_of("get clustermultigpuruntimes")  # offline: no file lacked it


def test_render_reads_a_runtime_no_file_has_from_the_cluster(
    fake: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = mgj(fake, capsys, "render", str(EXAMPLE))
    assert code == 1
    assert "spec.runtimeRef: ClusterMultiGPURuntime cpu-ddp does not exist" in err
    fake.put(CLUSTER_RUNTIMES, runtime())
    code, out, err = mgj(fake, capsys, "render", str(EXAMPLE))
    assert (code, err) == (0, "")
    assert f"image: {IMAGE}" in out


def test_get_and_describe_show_the_runtime(
    fake: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = {"name": "train", "namespace": NAMESPACE}
    copy = {"kind": "ClusterMultiGPURuntime", "name": "cpu-ddp", "generation": 3, "spec": {}}
    job = {"apiVersion": "multigpu.dev/v1alpha1", "kind": "MultiGPUJob", "metadata": meta}
    spec = {"runtimeRef": {"name": "cpu-ddp"}}
    fake.put(JOBS, {**job, "spec": spec, "status": {"phase": "Running", "runtime": copy}})
    code, out, _ = mgj(fake, capsys, "get")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split()[5] == "RUNTIME"
    assert row.split()[5] == "cpu-ddp"
    for command in ("get", "describe"):
        code, out, _ = mgj(fake, capsys, command, "train")
        assert code == 0
        assert "Runtime:   ClusterMultiGPURuntime cpu-ddp (its generation 3 kept)" in out


def test_render_on_the_server_merges_the_job_the_server_would_store(
    fake: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.put(CLUSTER_RUNTIMES, runtime())
    code, out, err = mgj(fake, capsys, "render", str(EXAMPLE), "--server")
    assert (code, err) == (0, "")
    assert f"image: {IMAGE}" in out
    assert fake.calls_of("dry-run multigpujobs")  # the server stored nothing

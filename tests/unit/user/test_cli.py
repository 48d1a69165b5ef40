"""The `mgj` command line: what a user sees when the input is wrong, or unusual."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator import cli
from multigpu_operator.cli.describe import event_line
from multigpu_operator.cli.render import render
from support.fake_cluster import FakeCluster
from support.spec_mutations import mutations

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
SPEC: dict[str, Any] = {
    "mode": "DistributedDataParallel",
    "template": {"spec": {"containers": [{"name": "trainer", "image": "x"}]}},
}
JOB: dict[str, Any] = {
    "apiVersion": "multigpu.dev/v1alpha1",
    "kind": "MultiGPUJob",
    "metadata": {"name": "one"},
    "spec": SPEC,
}


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        pytest.param(
            ["render", "/no/such/job.yaml"], "", "No such file or directory", id="missing"
        ),
        pytest.param(["render", "-"], "spec: [", "is not valid YAML", id="bad-yaml"),
    ],
)
def test_mgj_reports_unreadable_input_without_a_traceback(
    argv: list[str],
    stdin: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_render_reads_the_spec_as_the_api_server_stores_it() -> None:
    # A null in a field with a default means the default, as on the API server.
    job = {
        "apiVersion": "multigpu.dev/v1alpha1",
        "kind": "MultiGPUJob",
        "metadata": {"name": "nulls"},
        "spec": {
            "mode": "DistributedDataParallel",
            "masterPort": None,
            "template": {"spec": {"containers": [{"name": "trainer", "image": "x"}]}},
        },
    }
    objects, errors = render(iter([job]), "default")
    assert errors == []
    (pod,) = (o for o in objects if o["kind"] == "Pod")
    env = {v["name"]: v.get("value") for v in pod["spec"]["containers"][0]["env"]}
    assert env["MASTER_PORT"] == "29500"


def mgj(*args: str) -> subprocess.Popen[str]:
    """`mgj` as a user runs it, its output into a pipe this test reads."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-m", "multigpu_operator.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("args", [["crd"], ["render", "examples"]], ids=["crd", "render"])
def test_mgj_stops_quietly_when_its_reader_goes_away(args: list[str]) -> None:
    # `mgj crd | head -1`: the pipe closes after the first line.
    proc = mgj(*args)
    assert proc.stdout is not None
    assert proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in stderr
    assert "Error" not in stderr


def dump(*docs: Any) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_render_says_which_documents_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}}
    manifest = tmp_path / "all.yaml"
    manifest.write_text(dump(config_map, None, JOB, ["a list"]))

    assert cli.main(["render", str(manifest)]) == 0
    out = capsys.readouterr()
    assert out.err.splitlines() == [
        f"note: skipped {manifest} document 1: ConfigMap 'cfg', not a MultiGPUJob",
        f"note: skipped {manifest} document 4: a list, not a MultiGPUJob",
    ]
    assert [o["metadata"]["name"] for o in yaml.safe_load_all(out.out)] == ["one", "one-0"]


def test_render_of_only_other_kinds_is_an_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(dump({"kind": "Service"})))
    assert cli.main(["render", "-"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "note: skipped stdin document 1: Service, not a MultiGPUJob",
        "error: no MultiGPUJob in stdin",
    ]


def test_render_of_a_directory_renders_every_job_file_in_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # As `kubectl apply -f examples/`: its .yaml, .yml and .json files, in name order.
    assert cli.main(["render", str(EXAMPLES)]) == 0
    rendered = list(yaml.safe_load_all(capsys.readouterr().out))
    one_by_one = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        assert cli.main(["render", str(path)]) == 0
        one_by_one += list(yaml.safe_load_all(capsys.readouterr().out))
    assert rendered == one_by_one
    assert {o["metadata"]["name"] for o in rendered if o["kind"] == "Service"} == {
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in EXAMPLES.glob("*.yaml")
    }


def test_render_reports_every_conflict_of_a_job() -> None:
    container = {
        "name": "trainer",
        "image": "x",
        "env": [{"name": "WORLD_SIZE", "value": "2"}],
        "resources": {"limits": {"nvidia.com/gpu": 4}},
    }
    job = {**JOB, "spec": {**SPEC, "template": {"spec": {"containers": [container]}}}}
    objects, errors = render([job], "default")
    c = "spec.template.spec.containers[trainer]"
    assert objects == []
    assert errors == [
        f"one: {c}.env[WORLD_SIZE]: is set by the operator (see docs/env-contract.md); remove it",
        f"one: {c}.resources.limits[nvidia.com/gpu]: is 4, but spec.gpusPerReplica is 1; remove "
        "it (the operator sets it from spec.gpusPerReplica)",
    ]


def test_render_reports_the_field_and_why() -> None:
    job = {**JOB, "spec": {**SPEC, "replicas": 100000}}
    objects, errors = render([job], "default")
    assert objects == []
    assert errors == ["one: spec.replicas: 100000 is greater than the maximum of 5000"]


REFUSED = (
    'MultiGPUJob.multigpu.dev "one" is invalid: spec.replicas: Invalid value: 100000: '
    "spec.replicas in body should be less than or equal to 5000"
)


def test_render_server_prints_the_api_servers_words(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # --server sends each job as a dry run (client/dry_run.py) and plans what the
    # server would store; a refusal is printed as the server words it.
    asked: list[tuple[str, str]] = []
    fake = FakeCluster()

    async def dry_run_jobs(cluster: Any, jobs: list[Any], namespace: str) -> list[Any]:
        assert cluster is fake
        asked.extend((j["metadata"]["name"], namespace) for j in jobs)
        stored = {**jobs[0], "spec": {**SPEC, "replicas": 2, "masterPort": 29500}}
        return [stored, REFUSED]

    monkeypatch.setattr("multigpu_operator.client.dry_run.dry_run_jobs", dry_run_jobs)
    two = [{**JOB, "metadata": {"name": "two"}}, {**JOB, "spec": {**SPEC, "replicas": 100000}}]
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(two))
    assert cli.main(["render", str(path), "--server", "-n", "team"], cluster=fake) == 1
    out = capsys.readouterr()
    assert asked == [("two", "team"), ("one", "team")]
    assert out.err.strip() == f"error: one: {REFUSED}"
    pods = [o for o in yaml.safe_load_all(out.out) if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["two-0", "two-1"]


def test_render_answers_every_generated_spec_without_an_exception() -> None:
    # Offline, without a cluster: a sample of what tests/integration/test_generated_specs.py
    # holds against the API server. Every spec is rendered or refused with lines.
    for mutation in mutations(300):
        objects, errors = render([mutation.manifest], "default")
        assert bool(objects) != bool(errors), mutation


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (
            {
                "type": "Warning",
                "reason": "BackoffLimitExceeded",
                "note": "failed",
                "series": {"count": 2},
            },
            "Warning BackoffLimitExceeded failed (x2)",
        ),
        (
            {"type": "Warning", "reason": "NodeLost", "note": "gone", "deprecatedCount": 3},
            "Warning NodeLost             gone (x3)",
        ),
        ({"reason": "Created", "note": "2 pods"}, "Normal  Created              2 pods"),
    ],
)
def test_an_event_line_keeps_its_columns_apart(event: dict[str, Any], line: str) -> None:
    assert event_line(event) == line

"""The `mgj` command line: what a user sees when the input is wrong."""

from __future__ import annotations

import io

import pytest

from multigpu_operator import cli


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
    objects, errors = cli.render(iter([job]), "default")
    assert errors == []
    (pod,) = (o for o in objects if o["kind"] == "Pod")
    env = {v["name"]: v.get("value") for v in pod["spec"]["containers"][0]["env"]}
    assert env["MASTER_PORT"] == "29500"

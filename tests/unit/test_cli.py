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

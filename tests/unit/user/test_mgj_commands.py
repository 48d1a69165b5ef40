"""`mgj submit|get|wait|delete|describe|logs` on the operator's in-memory API server
(support/fake_cluster.py, the user's side in support/client_jobs.py). Against a real API
server: tests/integration/test_mgj_cli.py."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from multigpu_operator import cli
from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.cli import jobs, show
from multigpu_operator.client import Client
from multigpu_operator.cluster.errors import Invalid
from multigpu_operator.cluster.kinds import JOBS
from support.client_jobs import (
    MANIFEST,
    job_names,
    phases,
    pod,
    put_event,
    put_job,
    put_logs,
    put_pods,
    set_status,
    user_cluster,
)
from support.fake_cluster import FakeCluster


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    return user_cluster(tmp_path, monkeypatch)


def mgj(fake: FakeCluster, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv), cluster=fake)
    out, err = capsys.readouterr()
    return code, out, err


def test_mgj_submit_get_describe_delete(
    fake: FakeCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "job.yaml").write_text(MANIFEST)
    assert mgj(fake, capsys, "submit", str(tmp_path / "job.yaml")) == (0, "train\n", "")
    put_pods(fake, pod(0))
    phases(fake, ["Pending"])
    code, out, _ = mgj(fake, capsys, "get", "train")
    assert code == 0
    assert "Phase:     Pending" in out
    assert "r0   train-0" in out
    assert "node-a" in out
    code, out, _ = mgj(fake, capsys, "get")
    assert code == 0
    assert out.splitlines()[0].split() == [
        "NAME",
        "PHASE",
        "ATTEMPT",
        "PROGRESS",
        "ETA",
        "RUNTIME",
        "AGE",
    ]
    assert out.splitlines()[1].split()[:2] == ["train", "Pending"]
    set_status(
        fake,
        "train",
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "no GPU",
                }
            ],
        },
    )
    put_event(fake, "train", "Warning", "FailedScheduling", "0/3 nodes")
    put_event(fake, "other", "Warning", "NotThisJob", "of another job")
    code, out, _ = mgj(fake, capsys, "describe", "train")
    assert code == 0
    assert "Scheduled=False Unschedulable: no GPU" in out
    assert "FailedScheduling" in out
    assert "0/3 nodes" in out
    assert "NotThisJob" not in out
    (events,) = fake.calls_of("list events")
    assert events.args == ("team", None, "regarding.name=train,regarding.kind=MultiGPUJob")
    assert mgj(fake, capsys, "delete", "train") == (0, "train deleted\n", "")


@pytest.mark.parametrize(
    ("flags", "reads_while_deleting", "code", "err", "left"),
    [
        pytest.param([], 5, 0, "", set(), id="waits-until-gone"),
        pytest.param(["--no-wait"], 5, 0, "", {"train"}, id="no-wait"),
        pytest.param(
            ["--timeout", "0.2"], 10**6,
            1, "error: job 'train' is still being deleted after 0.2 s\n", {"train"},
            id="timeout",
        ),
    ],
)  # fmt: skip
def test_mgj_delete_waits_until_the_job_is_gone_as_kubectl_does(
    fake: FakeCluster,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    reads_while_deleting: int,
    code: int,
    err: str,
    left: set[str],
) -> None:
    # Its pods are deleted first (Foreground): a finalizer holds the job meanwhile, for
    # as many reads of it after the delete.
    put_job(fake, finalizers=["foregroundDeletion"])
    reads = [lambda: None] * min(reads_while_deleting, 1000)
    release = lambda: fake.release(JOBS, "train", "team")  # noqa: E731
    fake.before("get multigpujobs", lambda: None, *reads, release)
    done, out, said = mgj(fake, capsys, "delete", "train", *flags)
    assert (done, said) == (code, err)
    assert out == ("train deleted\n" if code == 0 else "")
    assert job_names(fake) == left


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["get", "nope"], "no MultiGPUJob 'nope' in namespace 'team'", id="no-job"),
        pytest.param(["get", "train", "-n", "other"], "in namespace 'other'", id="wrong-namespace"),
        pytest.param(["delete", "nope"], "no MultiGPUJob 'nope'", id="delete-no-job"),
        pytest.param(["describe", "nope"], "no MultiGPUJob 'nope'", id="describe-no-job"),
        pytest.param(["submit", "invalid"], r"spec.replicas: Required", id="invalid-file"),
        pytest.param(["submit", "missing.yaml"], "No such file", id="no-file"),
    ],
)
def test_mgj_bad_input_is_one_line_and_a_nonzero_exit(
    fake: FakeCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    put_job(fake)
    (tmp_path / "invalid").write_text(MANIFEST.replace("{replicas: 2}", "{}"))
    refusal = 'MultiGPUJob.multigpu.dev "train" is invalid: spec.replicas: Required'
    fake.fail("create multigpujobs", Invalid(refusal, 422))
    monkeypatch.chdir(tmp_path)
    code, out, err = mgj(fake, capsys, *argv)
    assert code != 0
    assert out == ""
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize(
    ("moves", "argv", "code", "said"),
    [
        pytest.param(["Running", "Succeeded"], [], 0, "train is Succeeded", id="succeeded"),
        pytest.param(["Pending", "Running"], ["--for", "Running"], 0, "is Running", id="running"),
        pytest.param(["Running", "Failed"], [], 1, "job 'train' is Failed", id="failed"),
        pytest.param(["Pending"] * 1000, ["--timeout", "0.1"], 2, "after 0.1 s", id="timeout"),
    ],
)
def test_mgj_wait_says_how_it_ended_by_its_exit_code(
    fake: FakeCluster,
    capsys: pytest.CaptureFixture[str],
    moves: list[str],
    argv: list[str],
    code: int,
    said: str,
) -> None:
    Client(cluster=fake).create(MANIFEST)
    phases(fake, moves)
    got, out, err = mgj(fake, capsys, "wait", "train", *argv)
    assert got == code
    assert said in (out if code == 0 else err)
    # Piped: a plain line per change, no carriage returns.
    assert "\r" not in out
    assert out.splitlines()[0].startswith(f"train: {moves[0]}")


def test_mgj_logs_of_one_replica(fake: FakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    put_job(fake, status={"phase": "Running"})
    put_pods(fake, pod(0), pod(1))
    put_logs(fake, {"train-0": ["zero"], "train-1": ["one"]})
    assert mgj(fake, capsys, "logs", "train", "--replica", "1") == (  # the context's namespace
        0,
        "[train-1 r1] one\n",
        "",
    )
    code, _, err = mgj(fake, capsys, "logs", "train", "-n", "team", "--replica", "5")
    assert code == 1
    assert "has no pod of replica 5 in attempt 1" in err


def test_mgj_logs_follow_shows_the_jobs_status_on_stderr_when_piped(
    fake: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    put_job(fake, status={"phase": "Failed", "reason": "BackoffLimitExceeded"})
    put_pods(fake, pod(0))
    put_logs(fake, {"train-0": ["zero"]})
    code, out, err = mgj(fake, capsys, "logs", "train", "--follow")
    assert (code, out) == (0, "[train-0 r0] zero\n")
    assert err == "train: Failed (BackoffLimitExceeded), attempt 1\n"


def test_mgj_submit_reads_stdin(
    fake: FakeCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(MANIFEST))
    assert mgj(fake, capsys, "submit", "-") == (0, "train\n", "")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_mgj_wait_on_a_terminal_rewrites_one_status_line(fake: FakeCluster) -> None:
    Client(cluster=fake).create(MANIFEST)
    phases(fake, ["Pending", "Running", "Succeeded"])
    out = Terminal()
    assert jobs.wait(Client(cluster=fake), "train", Phase.SUCCEEDED, 5, out) == 0
    shown = out.getvalue()
    assert shown.count("\r\033[K") == 3
    assert shown.endswith("\ntrain is Succeeded\n")


@pytest.mark.parametrize(
    ("progress", "text"),
    [
        ({"step": 1200, "summary": "step 1200"}, "step 1200"),
        (
            {"step": 1200, "totalSteps": 2876, "summary": "41%", "eta": "1h12m"},
            "41% (step 1200 of 2876, ETA 1h12m)",
        ),
        ({"step": 5, "totalSteps": 10, "summary": "50%"}, "50% (step 5 of 10)"),
    ],
)
def test_progress_shows_in_get_and_wait(progress: dict[str, Any], text: str) -> None:
    status = JobStatus.model_validate({"phase": "Running", "attempt": 1, "progress": progress})
    assert show.progress_text(status) == text
    assert show.status_line("train", status).endswith(f", {text}")


# `mgj get` in a process of its own, on an in-memory API server that holds one job.
GET_ONE_JOB = """\
import sys
from multigpu_operator import cli
from support.client_jobs import put_job
from support.fake_cluster import FakeCluster
fake = FakeCluster()
put_job(fake)
sys.exit(cli.main(["get"], cluster=fake))
"""


def test_mgj_get_stops_quietly_when_its_reader_goes_away(fake: FakeCluster) -> None:
    # `mgj get | head -1`, the reader gone before the first write: the write fails on a
    # closed pipe, and mgj says nothing about it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("PYTHONUNBUFFERED", None)  # a user's stdout: buffered, written at the end
    proc = subprocess.Popen(
        [sys.executable, "-c", GET_ONE_JOB],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert err == ""

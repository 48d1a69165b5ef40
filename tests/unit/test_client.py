"""multigpu_operator.client and `mgj submit|get|wait|delete|describe|logs` against an HTTP
server in the test that answers as the API server would, reached through a kubeconfig
file as a user's would be. Against a real API server: tests/integration/."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from multigpu_operator import cli, cli_jobs
from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.client import (
    AsyncClient,
    Client,
    InvalidJob,
    JobEnded,
    JobNotFound,
    WaitTimeout,
    kubeconfig_login,
)

JOBS = "/apis/multigpu.dev/v1alpha1/namespaces/{ns}/multigpujobs"
PODS = "/api/v1/namespaces/{ns}/pods"
EVENTS = "/api/v1/namespaces/{ns}/events"
MANIFEST = """\
apiVersion: multigpu.dev/v1alpha1
kind: MultiGPUJob
metadata: {name: train}
spec: {replicas: 2}
"""


def pod(index: int, attempt: int = 1, node: str = "node-a") -> dict[str, Any]:
    labels = {
        "multigpu.dev/job-name": "train",
        "multigpu.dev/replica-index": str(index),
        "multigpu.dev/attempt": str(attempt),
    }
    return {
        "metadata": {"name": f"train-{index}", "uid": f"{index}-{attempt}", "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "trainer"}]},
        "status": {"phase": "Running"},
    }


@dataclass
class ApiServer:
    """Jobs of namespace `team`; a job's phase moves along `phases`, one per read."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    phases: list[str] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)
    queries: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    # Reads of a deleted job that still find it (its pods are deleted first).
    reads_while_deleting: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.queries.append((request.method, request.path, dict(request.query)))
        jobs, pods = JOBS.format(ns="team"), PODS.format(ns="team")
        if request.path == jobs and request.method == "POST":
            body = await request.json()
            if "replicas" not in body["spec"]:
                message = 'MultiGPUJob.multigpu.dev "train" is invalid: spec.replicas: Required'
                return web.json_response({"message": message}, status=422)
            stored = {**body, "metadata": {**body["metadata"], "namespace": "team"}}
            self.jobs[body["metadata"]["name"]] = stored
            return web.json_response(stored, status=201)
        if request.path == jobs:
            meta = {"resourceVersion": "1"}
            return web.json_response({"items": list(self.jobs.values()), "metadata": meta})
        if request.path.startswith(jobs + "/"):
            name = request.path.removeprefix(jobs + "/")
            if name not in self.jobs:
                return web.json_response({"message": "not found"}, status=404)
            if request.method == "DELETE" or "deletionTimestamp" in self.jobs[name]["metadata"]:
                self.jobs[name]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                if self.reads_while_deleting <= 0:
                    return web.json_response(self.jobs.pop(name))
                self.reads_while_deleting -= request.method == "GET"
                return web.json_response(self.jobs[name])
            if self.phases:
                self.jobs[name]["status"] = {"phase": self.phases.pop(0), "attempt": 1}
            return web.json_response(self.jobs[name])
        if request.path == pods:
            return web.json_response({"items": self.pods, "metadata": {"resourceVersion": "1"}})
        if request.path == EVENTS.format(ns="team"):
            return web.json_response({"items": self.events})
        if request.path.startswith(pods + "/"):
            name = request.path.removeprefix(pods + "/").removesuffix("/log")
            return web.Response(body="".join(f"{line}\n" for line in self.logs[name]).encode())
        return web.json_response({"message": "not found"}, status=404)


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    """The server in a thread of its own (the blocking client runs event loops of its
    own), and a kubeconfig whose context's namespace is `team`, as $KUBECONFIG."""
    server = ApiServer()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
        "current-context": "x",
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setattr("multigpu_operator.client.aio.POLL_S", 0.01)
    yield server
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def test_the_blocking_client_creates_gets_lists_and_deletes(api: ApiServer) -> None:
    jobs = Client()
    assert jobs.namespace == "team"  # the kubeconfig context's
    assert jobs.create(MANIFEST) == "train"
    api.pods = [pod(1, node="node-b"), pod(0), pod(0, attempt=0)]
    api.phases = ["Running"]
    view = jobs.get("train")
    assert (view.phase, view.status.attempt) == (Phase.RUNNING, 1)
    assert [(p.replica, p.name, p.node, p.state) for p in view.pods] == [
        (0, "train-0", "node-a", "Running"),
        (1, "train-1", "node-b", "Running"),
    ]
    assert [v.name for v in jobs.list()] == ["train"]
    jobs.delete("train")
    with pytest.raises(JobNotFound, match="no MultiGPUJob 'train' in namespace 'team'"):
        jobs.get("train")


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(yaml.safe_load(MANIFEST), id="dict"),
        pytest.param(MANIFEST, id="yaml"),
        pytest.param("path", id="path"),
    ],
)
def test_a_job_is_given_as_a_dict_yaml_or_a_path(
    api: ApiServer, tmp_path: Path, given: Any
) -> None:
    if given == "path":
        given = tmp_path / "job.yaml"
        given.write_text(MANIFEST)
    assert Client().create(given) == "train"
    assert api.jobs["train"]["spec"] == {"replicas": 2}


def test_the_servers_refusal_names_the_field(api: ApiServer) -> None:
    with pytest.raises(InvalidJob, match=r"spec\.replicas: Required"):
        Client().create(MANIFEST.replace("{replicas: 2}", "{}"))
    with pytest.raises(InvalidJob, match="not a MultiGPUJob"):
        Client().create({"kind": "Pod"})


@pytest.mark.parametrize(
    ("phases", "for_", "raised"),
    [
        pytest.param(["Pending", "Running", "Succeeded"], Phase.SUCCEEDED, None, id="succeeds"),
        pytest.param(["Pending", "Running"], Phase.RUNNING, None, id="runs"),
        pytest.param(["Running", "Failed"], Phase.SUCCEEDED, JobEnded, id="fails"),
        pytest.param(["Pending"] * 1000, Phase.SUCCEEDED, WaitTimeout, id="times-out"),
    ],
)
def test_wait(
    api: ApiServer, phases: list[str], for_: Phase, raised: type[Exception] | None
) -> None:
    jobs = Client()
    jobs.create(MANIFEST)
    api.phases = list(phases)
    seen: list[Phase | None] = []
    if raised is None:
        status = jobs.wait("train", for_, timeout=5, on_status=lambda s: seen.append(s.phase))
        assert status.phase == for_
        assert seen == [Phase(p) for p in phases]
    else:
        with pytest.raises(raised):
            jobs.wait("train", for_, timeout=0.2)


def test_the_async_client_and_logs_of_one_replica(api: ApiServer) -> None:
    api.pods = [pod(0), pod(1)]
    api.logs = {"train-0": ["zero"], "train-1": ["one", "two"]}

    async def use() -> list[str]:
        async with AsyncClient(namespace="team", login=kubeconfig_login()) as jobs:
            await jobs.create(yaml.safe_load(MANIFEST))
            return [line async for line in jobs.logs("train")]

    assert asyncio.run(use()) == ["[train-0 r0] zero", "[train-1 r1] one", "[train-1 r1] two"]
    assert list(Client().logs("train", replica=1)) == ["[train-1 r1] one", "[train-1 r1] two"]


def mgj(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_mgj_submit_get_describe_delete(
    api: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "job.yaml").write_text(MANIFEST)
    assert mgj(capsys, "submit", str(tmp_path / "job.yaml")) == (0, "train\n", "")
    api.pods = [pod(0)]
    api.phases = ["Pending"]
    code, out, _ = mgj(capsys, "get", "train")
    assert code == 0
    assert "Phase:     Pending" in out
    assert "r0   train-0" in out
    assert "node-a" in out
    code, out, _ = mgj(capsys, "get")
    assert code == 0
    assert out.splitlines()[0].split() == ["NAME", "PHASE", "ATTEMPT", "PROGRESS", "ETA", "AGE"]
    assert out.splitlines()[1].split()[:2] == ["train", "Pending"]
    api.jobs["train"]["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "no GPU"}
        ],
    }
    api.events = [{"type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes"}]
    code, out, _ = mgj(capsys, "describe", "train")
    assert code == 0
    assert "Scheduled=False Unschedulable: no GPU" in out
    assert "FailedScheduling" in out
    assert "0/3 nodes" in out
    assert (
        "GET",
        EVENTS.format(ns="team"),
        {"fieldSelector": "involvedObject.name=train,involvedObject.kind=MultiGPUJob"},
    ) in api.queries
    assert mgj(capsys, "delete", "train") == (0, "train deleted\n", "")


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
    api: ApiServer,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    reads_while_deleting: int,
    code: int,
    err: str,
    left: set[str],
) -> None:
    api.jobs["train"] = {"metadata": {"name": "train", "namespace": "team"}, "spec": {}}
    api.reads_while_deleting = reads_while_deleting
    done, out, said = mgj(capsys, "delete", "train", *flags)
    assert (done, said) == (code, err)
    assert out == ("train deleted\n" if code == 0 else "")
    assert set(api.jobs) == left


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
    api: ApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    api.jobs["train"] = {"metadata": {"name": "train", "namespace": "team"}}
    (tmp_path / "invalid").write_text(MANIFEST.replace("{replicas: 2}", "{}"))
    monkeypatch.chdir(tmp_path)
    code, out, err = mgj(capsys, *argv)
    assert code != 0
    assert out == ""
    assert err.startswith("error: ")
    assert err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize(
    ("phases", "argv", "code", "said"),
    [
        pytest.param(["Running", "Succeeded"], [], 0, "train is Succeeded", id="succeeded"),
        pytest.param(["Pending", "Running"], ["--for", "Running"], 0, "is Running", id="running"),
        pytest.param(["Running", "Failed"], [], 1, "job 'train' is Failed", id="failed"),
        pytest.param(["Pending"] * 1000, ["--timeout", "0.1"], 2, "after 0.1 s", id="timeout"),
    ],
)
def test_mgj_wait_says_how_it_ended_by_its_exit_code(
    api: ApiServer,
    capsys: pytest.CaptureFixture[str],
    phases: list[str],
    argv: list[str],
    code: int,
    said: str,
) -> None:
    Client().create(MANIFEST)
    api.phases = list(phases)
    got, out, err = mgj(capsys, "wait", "train", *argv)
    assert got == code
    assert said in (out if code == 0 else err)
    # Piped: a plain line per change, no carriage returns.
    assert "\r" not in out
    assert out.splitlines()[0].startswith(f"train: {phases[0]}")


def test_mgj_logs_of_one_replica(api: ApiServer, capsys: pytest.CaptureFixture[str]) -> None:
    api.jobs["train"] = {"metadata": {"name": "train"}, "status": {"phase": "Running"}}
    api.pods = [pod(0), pod(1)]
    api.logs = {"train-0": ["zero"], "train-1": ["one"]}
    assert mgj(capsys, "logs", "train", "--replica", "1") == (  # the context's namespace
        0,
        "[train-1 r1] one\n",
        "",
    )
    code, _, err = mgj(capsys, "logs", "train", "-n", "team", "--replica", "5")
    assert code == 1
    assert "has no pod of replica 5 in attempt 1" in err


def test_mgj_logs_follow_shows_the_jobs_status_on_stderr_when_piped(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    api.jobs["train"] = {"metadata": {"name": "train"}, "status": {"phase": "Failed"}}
    api.jobs["train"]["status"]["reason"] = "BackoffLimitExceeded"
    api.pods = [pod(0)]
    api.logs = {"train-0": ["zero"]}
    code, out, err = mgj(capsys, "logs", "train", "--follow")
    assert (code, out) == (0, "[train-0 r0] zero\n")
    assert err == "train: Failed (BackoffLimitExceeded), attempt 1\n"


def test_mgj_submit_reads_stdin(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(MANIFEST))
    assert mgj(capsys, "submit", "-") == (0, "train\n", "")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_mgj_wait_on_a_terminal_rewrites_one_status_line(api: ApiServer) -> None:
    Client().create(MANIFEST)
    api.phases = ["Pending", "Running", "Succeeded"]
    out = Terminal()
    assert cli_jobs.wait(Client(), "train", Phase.SUCCEEDED, 5, out) == 0
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
    assert cli_jobs.progress_text(status) == text
    assert cli_jobs.status_line("train", status).endswith(f", {text}")


def test_mgj_get_stops_quietly_when_its_reader_goes_away(api: ApiServer) -> None:
    # `mgj get | head -1`, the reader gone before the first write: the write fails on a
    # closed pipe, and mgj says nothing about it.
    Client().create(MANIFEST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("PYTHONUNBUFFERED", None)  # a user's stdout: buffered, written at the end
    proc = subprocess.Popen(
        [sys.executable, "-m", "multigpu_operator.cli", "get"],
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

"""`mgj logs`' requests (cluster/pod_logs.py) against an HTTP server in the test that
answers as the API server would: the job, its pods by label selector, and each pod's log,
followed as a stream. Against a real API server: tests/integration/."""

from __future__ import annotations

import asyncio
import io
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from multigpu_operator.client.log_pods import LogRequest, LogsError
from multigpu_operator.cluster import pod_logs
from multigpu_operator.cluster.rest import Rest

pytestmark = pytest.mark.asyncio

JOB_PATH = "/apis/multigpu.dev/v1alpha1/namespaces/team/multigpujobs/train"
PODS_PATH = "/api/v1/namespaces/team/pods"


@dataclass
class Token:
    server: str
    proxy_url: str | None = None

    def as_ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context()

    def as_http_headers(self) -> dict[str, str]:
        return {"Authorization": "Bearer t"}


def pod(index: int, attempt: int, containers: tuple[str, ...] = ("trainer",)) -> dict[str, Any]:
    labels = {
        "multigpu.dev/job-name": "train",
        "multigpu.dev/replica-index": str(index),
        "multigpu.dev/attempt": str(attempt),
    }
    return {
        "metadata": {"name": f"train-{index}", "uid": f"{index}-{attempt}", "labels": labels},
        "spec": {"containers": [{"name": c} for c in containers]},
    }


@dataclass
class ApiServer:
    """One job in namespace `team`, its pods and their logs (by name: the current pod's)."""

    job: dict[str, Any] | None = field(default_factory=lambda: {"status": {"phase": "Running"}})
    pods: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)
    not_started: set[str] = field(default_factory=set)  # answer 400 once, then the log
    queries: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    # Following: run for each pod's stream once it is requested, before its lines.
    on_stream: dict[str, Any] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.queries.append((request.path, dict(request.query)))
        if request.path == JOB_PATH:
            if self.job is None:
                return web.json_response({"message": "not found"}, status=404)
            return web.json_response(self.job)
        if request.path == PODS_PATH:
            meta = {"resourceVersion": "1"}
            return web.json_response({"items": self.pods, "metadata": meta})
        name = request.path.removeprefix(PODS_PATH + "/").removesuffix("/log")
        if name in self.not_started:
            self.not_started.discard(name)
            message = f'container "trainer" in pod "{name}" is waiting to start'
            return web.json_response({"message": message}, status=400)
        lines = self.logs[name]
        if request.query.get("follow") != "true":
            return web.Response(body="".join(f"{line}\n" for line in lines).encode())
        stream = web.StreamResponse()
        await stream.prepare(request)
        if name in self.on_stream:
            await self.on_stream[name]()
        for line in lines:
            await stream.write(f"{line}\n".encode())
        return stream


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[ApiServer, Rest]]:
    api = ApiServer()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", api.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rest = Rest(lambda: Token(f"http://127.0.0.1:{runner.addresses[0][1]}"))
    yield api, rest
    await rest.close()
    await runner.cleanup()


async def test_the_logs_of_the_latest_attempt_by_replica_index(
    server: tuple[ApiServer, Rest], capsys: pytest.CaptureFixture[str]
) -> None:
    api, rest = server
    api.pods = [pod(2, 2), pod(1, 2), pod(0, 2, ("sidecar", "trainer")), pod(3, 2)]
    api.logs = {"train-0": ["a", "b"], "train-1": ["c"], "train-2": [], "train-3": ["d"]}
    api.not_started = {"train-3"}
    out = io.StringIO()
    await pod_logs.read_logs(rest, LogRequest("train", "team", tail=10), out)
    assert out.getvalue() == "[train-0 r0] a\n[train-0 r0] b\n[train-1 r1] c\n"
    assert '[train-3 r3] no log: container "trainer" in pod "train-3" is waiting' in (
        capsys.readouterr().err
    )
    assert api.queries[:3] == [
        (JOB_PATH, {}),
        (PODS_PATH, {"labelSelector": "multigpu.dev/job-name=train"}),
        (f"{PODS_PATH}/train-0/log", {"container": "trainer", "tailLines": "10"}),
    ]


@pytest.mark.parametrize(
    ("job", "pods", "message"),
    [
        pytest.param(None, [], "no MultiGPUJob 'train' in namespace 'team'", id="no-job"),
        pytest.param(
            {"status": {"phase": "Failed"}},
            [],
            "MultiGPUJob 'train' in namespace 'team' has no pods",
            id="ended-without-pods",
        ),
        pytest.param({}, [pod(0, 1)], "has no pods of attempt 2; it has pods of attempt 1", id="n"),
    ],
)
@pytest.mark.parametrize("follow", [False, True])
async def test_nothing_to_show_is_an_error(
    server: tuple[ApiServer, Rest],
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    message: str,
    follow: bool,
) -> None:
    api, rest = server
    api.job, api.pods = job, pods
    read = pod_logs.follow_logs if follow else pod_logs.read_logs
    with pytest.raises(LogsError, match=message):
        await read(rest, LogRequest("train", "team", attempt=2 if pods else None), io.StringIO())


async def test_following_two_pods_at_once_and_the_next_attempt_until_the_job_ends(
    server: tuple[ApiServer, Rest], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, rest = server
    monkeypatch.setattr(pod_logs, "RETRY_S", 0.01)
    api.pods = [pod(1, 1), pod(0, 1)]
    api.logs = {"train-0": ["step 1", "lost"], "train-1": ["step 1", "step 2"]}
    api.not_started = {"train-1"}  # still pulling its image when first asked
    both_streaming = asyncio.Event()

    async def first_stream_waits_for_the_second() -> None:
        # Read one pod after the other, train-0's log would never come.
        await asyncio.wait_for(both_streaming.wait(), 5)

    async def second_stream_starts_a_retry() -> None:
        both_streaming.set()
        # The job is retried: attempt 2's pods under the same names; then it succeeds.
        api.pods = [pod(0, 2), pod(1, 2)]
        api.logs = {"train-0": ["resumed at step 1"], "train-1": ["resumed at step 1"]}
        api.on_stream = {}
        api.job = {"status": {"phase": "Succeeded"}}

    api.on_stream = {
        "train-0": first_stream_waits_for_the_second,
        "train-1": second_stream_starts_a_retry,
    }
    out = io.StringIO()
    await asyncio.wait_for(pod_logs.follow_logs(rest, LogRequest("train", "team"), out, 0.02), 10)
    lines = out.getvalue().splitlines()
    assert sorted(lines) == sorted(
        [
            "[train-0 r0] step 1",
            "[train-0 r0] lost",
            "[train-1 r1] step 1",
            "[train-1 r1] step 2",
            "[train-0 r0] resumed at step 1",
            "[train-1 r1] resumed at step 1",
        ]
    )
    for name in ("train-0 r0", "train-1 r1"):
        own = [line for line in lines if line.startswith(f"[{name}]")]
        assert own[-1] == f"[{name}] resumed at step 1"
    follows = [q for path, q in api.queries if path.endswith("/log")]
    assert follows[0] == {"container": "trainer", "follow": "true"}
    assert len(follows) == 5  # two pods, train-1 twice, then attempt 2's two pods


async def test_following_a_fixed_attempt_ignores_later_pods(
    server: tuple[ApiServer, Rest],
) -> None:
    api, rest = server
    api.job = {"status": {"phase": "Failed"}}
    api.pods = [pod(0, 1), pod(0, 2)]
    api.logs = {"train-0": ["x"]}
    out = io.StringIO()
    await pod_logs.follow_logs(rest, LogRequest("train", "team", attempt=2), out, 0.02)
    assert out.getvalue() == "[train-0 r0] x\n"


async def test_following_a_job_before_its_pods_exist_waits_for_them(
    server: tuple[ApiServer, Rest],
) -> None:
    api, rest = server
    api.job = {"status": {"phase": "Pending"}}
    phases: list[str] = []

    def on_job(job: Mapping[str, Any]) -> None:
        phases.append(job["status"]["phase"])
        if len(phases) == 2:  # the operator has created the pods, which ran and ended
            api.pods = [pod(0, 1)]
            api.logs = {"train-0": ["done"]}
            api.job = {"status": {"phase": "Succeeded"}}

    out = io.StringIO()
    follow = pod_logs.follow_logs(rest, LogRequest("train", "team"), out, 0.01, on_job=on_job)
    await asyncio.wait_for(follow, 10)
    assert out.getvalue() == "[train-0 r0] done\n"
    assert phases == ["Pending", "Pending", "Succeeded"]

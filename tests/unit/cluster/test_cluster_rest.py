"""The operator's HTTP client (cluster/rest.py) over a real HTTP server in the test: what
it sends, a rotated service-account token read again after a 401, and error answers as
domain errors. Its calls against a real API server: tests/integration/."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from multigpu_operator.cluster.api import Kube
from multigpu_operator.cluster.errors import ClusterError, NotFound, Unreachable, transient
from multigpu_operator.cluster.kinds import JOBS, PODS
from multigpu_operator.cluster.rest import MERGE_PATCH, Rest


@dataclass
class Token:
    server: str
    token: str
    proxy_url: str | None = None

    def as_ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context()

    def as_http_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class ApiServer:
    """Answers as the API server would: 401 to any token but the current one."""

    token: str = "new"
    seen: list[dict[str, Any]] | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        assert self.seen is not None
        self.seen.append(
            {
                "method": request.method,
                "path": request.path,
                "query": dict(request.query),
                "type": request.content_type,
                "body": await request.read(),
            }
        )
        if request.path.endswith("/missing"):
            message = 'pods "missing" not found'
            return web.json_response({"kind": "Status", "message": message}, status=404)
        if request.query.get("watch") == "true":
            stream = web.StreamResponse()
            await stream.prepare(request)
            for n in range(3):
                await stream.write(orjson.dumps({"type": "ADDED", "n": n}) + b"\n")
            return stream
        return web.json_response({"ok": True})


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[ApiServer, str]]:
    api = ApiServer(seen=[])
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield api, f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.mark.asyncio
async def test_a_request_sends_its_body_query_and_type(server: tuple[ApiServer, str]) -> None:
    api, url = server
    rest = Rest(lambda: Token(url, "new"))
    try:
        got = await rest.json("PATCH", "/api/v1/x", {"fieldManager": "m"}, {"a": 1}, MERGE_PATCH)
    finally:
        await rest.close()
    assert got == {"ok": True}
    assert api.seen == [
        {
            "method": "PATCH",
            "path": "/api/v1/x",
            "query": {"fieldManager": "m"},
            "type": MERGE_PATCH,
            "body": b'{"a":1}',
        }
    ]


@pytest.mark.asyncio
async def test_a_refused_token_is_read_again_once(server: tuple[ApiServer, str]) -> None:
    api, url = server
    tokens = iter(["old", "new", "newer"])
    logins: list[str] = []

    def login() -> Token:
        logins.append(token := next(tokens))
        return Token(url, token)

    rest = Rest(login)
    try:
        assert await rest.json("GET", "/api/v1/pods") == {"ok": True}
        assert logins == ["old", "new"]
        api.token = "other"  # a token nobody will hand us: refused after one more try
        with pytest.raises(ClusterError) as raised:
            await rest.call("GET", "/api/v1/pods")
    finally:
        await rest.close()
    assert (raised.value.status, logins) == (401, ["old", "new", "newer"])


@pytest.mark.asyncio
async def test_an_error_answer_is_its_domain_error(server: tuple[ApiServer, str]) -> None:
    _, url = server
    rest = Rest(lambda: Token(url, "new"))
    try:
        with pytest.raises(NotFound) as raised:
            await rest.call("DELETE", "/api/v1/namespaces/n/pods/missing")
    finally:
        await rest.close()
    assert raised.value.message == 'pods "missing" not found'


@pytest.mark.asyncio
async def test_a_watch_streams_its_lines(server: tuple[ApiServer, str]) -> None:
    _, url = server
    rest = Rest(lambda: Token(url, "new"))
    try:
        lines = [
            orjson.loads(line) async for line in rest.lines("/api/v1/pods", {"watch": "true"}, 5)
        ]
    finally:
        await rest.close()
    assert [event["n"] for event in lines] == [0, 1, 2]


def test_no_credentials_is_a_clear_error() -> None:
    with pytest.raises(ClusterError, match="neither a service account nor a kubeconfig"):
        Rest(lambda: None)


def closed_port() -> int:
    """A port nothing listens on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.asyncio
async def test_a_refused_connection_is_unreachable_for_requests_and_watches() -> None:
    rest = Rest(lambda: Token(f"http://127.0.0.1:{closed_port()}", "new"))
    try:
        with pytest.raises(Unreachable) as raised:
            await rest.call("GET", "/api/v1/pods")
        with pytest.raises(Unreachable):
            async for _ in rest.lines("/api/v1/pods", {"watch": "true"}, 5):
                pass
    finally:
        await rest.close()
    assert "ClientConnectorError" in raised.value.message
    assert transient(raised.value)


@pytest.mark.asyncio
async def test_a_connection_reset_without_an_answer_is_unreachable() -> None:
    async def hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    rest = Rest(lambda: Token(f"http://127.0.0.1:{port}", "new"))
    try:
        with pytest.raises(Unreachable):  # reset or disconnected, by timing
            await rest.call("GET", "/api/v1/pods")
    finally:
        await rest.close()
        server.close()


@pytest.mark.parametrize(
    ("status", "expected"),
    [(0, True), (429, True), (500, True), (503, True), (504, True), (403, False), (409, False)],
)
def test_transient_answers_are_no_answer_429_and_5xx(status: int, expected: bool) -> None:
    assert transient(ClusterError("x", status)) is expected


@pytest.mark.asyncio
async def test_status_writes_and_pod_creates_refuse_unknown_fields(
    server: tuple[ApiServer, str],
) -> None:
    """Strict field validation: a field the schema lacks is refused, never dropped with
    a warning nobody reads."""
    api, url = server
    kube = Kube(Rest(lambda: Token(url, "new")))
    try:
        await kube.patch(JOBS, "ns", "train", {"status": {"phase": "Running"}}, "7", "status")
        await kube.create(PODS, "ns", {"metadata": {"name": "train-0"}})
    finally:
        await kube.rest.close()
    assert api.seen is not None
    assert [(s["method"], s["query"].get("fieldValidation")) for s in api.seen] == [
        ("PATCH", "Strict"),
        ("POST", "Strict"),
    ]

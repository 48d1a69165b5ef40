"""The operator's HTTP client of the API server: one aiohttp session, JSON in and out.

The operator makes a dozen kinds of requests (create, patch, delete, list, watch) and
reads every answer as plain JSON. The generated client's thousand model modules cost
~37 MiB of the operator's memory for nothing it reads (docs/benchmarks.md), so the
requests are made here, on the credentials of kopf's own login (the service account in
a pod, else the kubeconfig): the very connection kopf's watches use.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from multigpu_operator import __version__
from multigpu_operator.cluster.errors import ClusterError, Unreachable, from_status
from multigpu_operator.cluster.login import Credentials, Login

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
# A request the API server does not answer is given up after this (its own
# --request-timeout is 60 s): a frozen server or a lost connection ends as Unreachable
# instead of holding a worker or a watch for aiohttp's default five minutes.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=70)


class Rest:
    """Requests to the API server; an error answer raises the domain error for it."""

    def __init__(self, login: Login, pool_size: int = 64) -> None:
        self._login = login
        credentials = self._credentials()
        self._server = credentials.server.rstrip("/")
        self._headers = {**credentials.as_http_headers(), "Accept": JSON}
        self._proxy, self._proxy_auth = _proxy(credentials.proxy_url, self._server)
        self._session = aiohttp.ClientSession(
            # Pods of many jobs are created concurrently: a small pool serialises them.
            connector=aiohttp.TCPConnector(limit=pool_size, ssl=credentials.as_ssl_context()),
            headers={"User-Agent": f"multigpu-operator/{__version__}"},
            timeout=REQUEST_TIMEOUT,
            # The proxy is read once, above: trusting the environment makes aiohttp look
            # the proxy variables and ~/.netrc up in a worker thread on every request
            # (a sixth of the operator's samples under load, docs/benchmarks.md).
            trust_env=False,
        )

    def _credentials(self) -> Credentials:
        credentials = self._login()
        if credentials is None:
            raise ClusterError("no credentials: neither a service account nor a kubeconfig")
        return credentials

    async def close(self) -> None:
        await self._session.close()

    async def call(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
    ) -> bytes:
        """The answer's body; an error status raises its domain error."""
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": content_type}
        status, reason, answer = await self._send(method, path, params, data, headers)
        if status == 401:
            # A service account's token is rotated by the kubelet: read it again, once.
            self._relogin()
            status, reason, answer = await self._send(method, path, params, data, headers)
        if not 200 <= status <= 299:
            raise refusal(status, reason, answer)
        return answer

    async def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: Mapping[str, str],
    ) -> tuple[int, str, bytes]:
        with unreachable():
            async with self._session.request(
                method,
                self._server + path,
                params=params,
                data=data,
                headers={**self._headers, **headers},
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
            ) as resp:
                return resp.status, resp.reason or "", await resp.read()

    async def json(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        answer: dict[str, Any] = orjson.loads(
            await self.call(method, path, params, body, content_type)
        )
        return answer

    async def lines(
        self, path: str, params: Mapping[str, str], timeout_s: float | None
    ) -> AsyncIterator[bytes]:
        """The lines of a streamed answer (a watch, a followed pod log), until the server
        ends it; with `timeout_s` None, however long that takes."""
        with unreachable():
            async with self._session.get(
                self._server + path,
                params=params,
                headers=self._headers,
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
                timeout=aiohttp.ClientTimeout(total=timeout_s, sock_connect=10),
            ) as resp:
                if resp.status == 401:
                    self._relogin()  # for the next watch: the caller starts one again
                if not 200 <= resp.status <= 299:
                    raise refusal(resp.status, resp.reason or "", await resp.read())
                async for line in resp.content:
                    yield line

    def _relogin(self) -> None:
        self._headers.update(self._credentials().as_http_headers())


@contextlib.contextmanager
def unreachable() -> Iterator[None]:
    """The client's own failures (refused, reset, timed out) as the domain's Unreachable:
    the layers above treat them as any transient answer and retry."""
    try:
        yield
    except (aiohttp.ClientError, TimeoutError) as err:
        raise Unreachable(f"{type(err).__name__}: {err}") from err


def _proxy(given: str | None, server: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The login's proxy, else HTTPS_PROXY/NO_PROXY for the API server by aiohttp's own
    rules, and the proxy's credentials."""
    if given:
        return given, None
    with contextlib.suppress(LookupError):
        proxy, auth = get_env_proxy_for_url(URL(server))
        return str(proxy), auth
    return None, None


def refusal(status: int, reason: str, body: bytes) -> ClusterError:
    """The domain error for an error answer, with the API server's own message (its
    Status object's `message` and causes), else the HTTP reason."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or "message" not in parsed:
        parsed = {"message": reason}
    return status_error({**parsed, "code": status}, reason)


def status_error(status: Mapping[str, Any], default: str) -> ClusterError:
    """The domain error for a Status object: its code, message and causes."""
    details = status.get("details") or {}
    causes = [str(c.get("reason", "")) for c in details.get("causes") or [] if isinstance(c, dict)]
    return from_status(status.get("code"), str(status.get("message", default)), causes)

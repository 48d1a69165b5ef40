"""The API server's answers as the operator reads them: raw bodies (never the client's
models), watch events decoded with orjson, and every error status turned into the
domain errors of cluster/errors.py (the only place that reads the client's exceptions)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import orjson
from kubernetes_asyncio.client.exceptions import ApiException

from multigpu_operator.cluster.errors import ClusterError, Conflict, from_status
from multigpu_operator.metrics import API_REQUESTS

# The name the API server records the operator's writes under (managedFields).
FIELD_MANAGER = "multigpu-operator"


# A list call of the client bound to its kind, namespace and selector: the same call lists
# (a page of items) or, with watch=True, streams watch events.
ListCall = Callable[..., Awaitable[Any]]


async def list_raw(kind: str, call: ListCall) -> tuple[list[dict[str, Any]], str]:
    """One list request: the items, as plain dicts, and the list's resourceVersion."""
    API_REQUESTS.labels("list", kind).inc()
    with domain_errors():
        data = orjson.loads(await read_body(await call(_preload_content=False)))
    return data["items"], data["metadata"]["resourceVersion"]


async def watch_raw(
    kind: str, call: ListCall, resource_version: str, timeout_seconds: int
) -> AsyncIterator[dict[str, Any]]:
    """Raw watch events ({type, object}) from `resource_version`, until the server ends
    the watch (after about `timeout_seconds`)."""
    API_REQUESTS.labels("watch", kind).inc()
    with domain_errors():
        resp = await call(
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _preload_content=False,
            _request_timeout=timeout_seconds + 30,
        )
    async for event in watch_events(resp):
        yield event


async def watch_events(resp: Any) -> AsyncIterator[dict[str, Any]]:
    """The events of a watch response, one JSON object a line, until the server ends it."""
    async with resp:
        async for line in resp.content:
            if not line.strip():
                continue
            # orjson: decoding the watch's events was the operator's largest own cost
            # after the request machinery (docs/benchmarks.md); it is twice as fast.
            event = orjson.loads(line)
            if event["type"] == "ERROR":
                # A Status object; 410 (Gone) when the version is too old.
                raise status_error(event["object"], "watch error")
            yield event


async def create(request: Awaitable[Any]) -> bool:
    try:
        with domain_errors():
            await read_body(await request)
    except Conflict:
        return False
    return True


async def read_body(resp: Any) -> bytes:
    """The body of a raw (`_preload_content=False`) answer; an error status raises
    ApiException as the client's own calls do.

    Raw answers because the generated client turns each into its model classes (a
    V1Pod of a few hundred objects per created pod), which nothing here reads: that was
    a tenth of the operator's CPU when creating pods (docs/benchmarks.md)."""
    async with resp:
        data: bytes = await resp.read()
        if not 200 <= resp.status <= 299:
            err = ApiException(status=resp.status, reason=resp.reason)
            err.body, err.headers = data, resp.headers  # as the client's own calls set them
            raise err
        return data


@contextlib.contextmanager
def domain_errors() -> Iterator[None]:
    """Raise the client's ApiException as the domain error for its status, with the API
    server's own message (the Status object's `message`), else the HTTP reason."""
    try:
        yield
    except ApiException as err:
        try:
            status = json.loads(err.body or "")
        except (TypeError, ValueError):
            status = None
        if not isinstance(status, dict) or "message" not in status:
            status = {"message": str(err.reason)}
        raise status_error({**status, "code": err.status}, str(err.reason)) from err


def status_error(status: Mapping[str, Any], default: str) -> ClusterError:
    """The domain error for a Status object: its code, message and causes."""
    details = status.get("details") or {}
    causes = [str(c.get("reason", "")) for c in details.get("causes") or [] if isinstance(c, dict)]
    return from_status(status.get("code"), str(status.get("message", default)), causes)

"""The shapes of the operator's requests and answers over cluster/rest.py: a create that
may find its object already there, a list (items and resourceVersion) and a watch
(decoded events), all counted by kind in the operator's request metric."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from multigpu_operator.cluster.errors import Conflict
from multigpu_operator.cluster.rest import Rest, status_error
from multigpu_operator.metrics import API_REQUESTS, api_request

# The name the API server records the operator's writes under (managedFields).
FIELD_MANAGER = "multigpu-operator"


def collection(group: str, version: str, plural: str, namespace: str | None = None) -> str:
    """The path of a collection: core (group "") or a named group, in one namespace or
    across all (or cluster-scoped)."""
    root = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"


async def create(
    rest: Rest, path: str, body: Mapping[str, Any], params: Mapping[str, str] | None = None
) -> bool:
    """Create; False if an object of that name exists already (a retry after a crash)."""
    try:
        await rest.call("POST", path, {"fieldManager": FIELD_MANAGER, **(params or {})}, body)
    except Conflict:
        return False
    return True


async def list_raw(
    rest: Rest, kind: str, path: str, selector: str | None = None
) -> tuple[list[dict[str, Any]], str]:
    """One list request: the items, as plain dicts, and the list's resourceVersion."""
    with api_request("list", kind):
        data = await rest.json("GET", path, {"labelSelector": selector} if selector else None)
    return data["items"], data["metadata"]["resourceVersion"]


async def watch_raw(
    rest: Rest,
    kind: str,
    path: str,
    resource_version: str,
    timeout_seconds: int,
    selector: str | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Raw watch events ({type, object}) from `resource_version`, until the server ends
    the watch (after about `timeout_seconds`)."""
    API_REQUESTS.labels("watch", kind).inc()
    params = {
        "watch": "true",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(timeout_seconds),
    }
    if selector:
        params["labelSelector"] = selector
    async for line in rest.lines(path, params, timeout_seconds + 30):
        if not line.strip():
            continue
        # orjson: decoding the watch's events was the operator's largest own cost
        # after the request machinery (docs/benchmarks.md); it is twice as fast.
        event = orjson.loads(line)
        if event["type"] == "ERROR":
            # A Status object; 410 (Gone) when the version is too old.
            raise status_error(event["object"], "watch error")
        yield event

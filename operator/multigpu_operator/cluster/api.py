"""The one module that talks to the API server (async, never blocking the loop).

`Kube` implements cluster.protocol.Cluster: everything above works on plain dicts and a
Kind, and this module turns each verb into its request over cluster/rest.py, whose error
answers are the domain errors of cluster/errors.py. Every request is counted and timed
by verb and resource (mgj_api_requests_total). The operator makes one Kube on kopf's
login (handlers.py); the client and `mgj` make their own with `open_kube`, on the
kubeconfig's, and write under a field manager of their own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from multigpu_operator.cluster.errors import Conflict, NotFound
from multigpu_operator.cluster.kinds import Kind
from multigpu_operator.cluster.login import Login
from multigpu_operator.cluster.rest import MERGE_PATCH, Rest, status_error
from multigpu_operator.metrics import API_REQUESTS, api_request

# The name the API server records the operator's writes under (managedFields).
FIELD_MANAGER = "multigpu-operator"


async def connect(login: Login, pool_size: int = 64) -> Rest:
    """A client of the API server on the credentials `login` gives (kopf's login: the
    service account in a pod, else the kubeconfig); made in the event loop it serves."""
    return Rest(login, pool_size)


def open_kube(login: Login, pool_size: int = 8, field_manager: str = FIELD_MANAGER) -> Kube:
    """A Kube on a connection pool of its own, for a command's or a notebook's few
    requests; made in the event loop it serves, and close()d there."""
    return Kube(Rest(login, pool_size), field_manager)


def _write_params(kind: Kind, manager: str, **more: str) -> dict[str, str]:
    params = {"fieldManager": manager, **more}
    if kind.strict:
        params["fieldValidation"] = "Strict"
    return params


@dataclass
class Kube:
    """The verbs of cluster.protocol.Cluster as requests."""

    rest: Rest
    # The name the API server records this client's writes under (managedFields).
    field_manager: str = FIELD_MANAGER

    async def close(self) -> None:
        await self.rest.close()

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        with api_request("get", kind.plural):
            return await self.rest.json("GET", kind.path(namespace, name))

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        params = {"labelSelector": selector} if selector else {}
        if fields:
            params["fieldSelector"] = fields
        with api_request("list", kind.plural):
            data = await self.rest.json("GET", kind.path(namespace), params or None)
        return data["items"], data["metadata"]["resourceVersion"]

    async def read(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        subresource: str,
        params: Mapping[str, str] | None = None,
    ) -> str:
        with api_request("get", f"{kind.plural}/{subresource}"):
            answer = await self.rest.call("GET", kind.path(namespace, name, subresource), params)
        return answer.decode(errors="replace")

    async def stream(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        subresource: str,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        # Counted, not timed: a stream lasts as long as its source (a followed log).
        API_REQUESTS.labels("get", f"{kind.plural}/{subresource}").inc()
        path = kind.path(namespace, name, subresource)
        # No total timeout: a followed container may be quiet for a long time.
        async for line in self.rest.lines(path, params or {}, timeout_s=None):
            yield line.decode(errors="replace").rstrip("\r\n")

    async def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        selector: str | None = None,
        timeout_seconds: int = 300,
        fields: str | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        API_REQUESTS.labels("watch", kind.plural).inc()
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if selector:
            params["labelSelector"] = selector
        if fields:
            params["fieldSelector"] = fields
        async for line in self.rest.lines(kind.path(namespace), params, timeout_seconds + 30):
            if not line.strip():
                continue
            # orjson: decoding the watch's events was the operator's largest own cost
            # after the request machinery (docs/benchmarks.md); it is twice as fast.
            event = orjson.loads(line)
            if event["type"] == "ERROR":
                # A Status object; 410 (Gone) when the version is too old.
                raise status_error(event["object"], "watch error")
            yield event

    async def create(
        self,
        kind: Kind,
        namespace: str | None,
        body: Mapping[str, Any],
        dry_run: bool = False,
        read_back: bool = True,
    ) -> dict[str, Any] | None:
        more = {"dryRun": "All"} if dry_run else {}
        params = _write_params(kind, self.field_manager, **more)
        try:
            with api_request("dry-run" if dry_run else "create", kind.plural):
                if not read_back:
                    await self.rest.call("POST", kind.path(namespace), params, body)
                    return {}
                return await self.rest.json("POST", kind.path(namespace), params, body)
        except Conflict:
            # AlreadyExists; a dry run checked the object all the same.
            return None

    async def replace(self, kind: Kind, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        with api_request("update", kind.plural):
            path = kind.path(meta.get("namespace"), meta["name"])
            return await self.rest.json("PUT", path, _write_params(kind, self.field_manager), body)

    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        resource_version: str | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        body = dict(patch)
        if resource_version:
            # A precondition: the server refuses the write (409) if the object changed.
            body["metadata"] = {**patch.get("metadata", {}), "resourceVersion": resource_version}
        resource = f"{kind.plural}/{subresource}" if subresource else kind.plural
        with api_request("patch", resource):
            path = kind.path(namespace, name, subresource)
            params = _write_params(kind, self.field_manager)
            return await self.rest.json("PATCH", path, params, body, MERGE_PATCH)

    async def delete(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        uid: str | None = None,
        propagation: str | None = None,
    ) -> None:
        """With `uid`, only that object: names are reused once an object is gone, and a
        delete by name alone could hit a newer one of the same name (as the kubelet
        learned, kubernetes#25169)."""
        body: dict[str, Any] = {}
        if uid:
            body["preconditions"] = {"uid": uid}
        if propagation:
            body["propagationPolicy"] = propagation
        # Conflict: the UID precondition failed, so the object meant is gone.
        with contextlib.suppress(NotFound, Conflict), api_request("delete", kind.plural):
            await self.rest.call("DELETE", kind.path(namespace, name), body=body or None)

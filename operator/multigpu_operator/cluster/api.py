"""The one module that talks to the API server (async, never blocking the loop).

`Kube` implements cluster.protocol.Cluster: everything above works on plain dicts, and
this module turns them into requests and every ApiException into the domain errors of
cluster/errors.py (the only place that reads the client's exceptions).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException
from yarl import URL

from multigpu_operator.api import kueue
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from multigpu_operator.cluster.errors import (
    ClusterError,
    Conflict,
    NamespaceTerminating,
    NotFound,
    from_status,
)
from multigpu_operator.cluster.events import event_body
from multigpu_operator.metrics import API_REQUESTS

log = logging.getLogger(__name__)

FIELD_MANAGER = "multigpu-operator"


async def connect(pool_size: int = 64) -> client.ApiClient:
    """An API client from the in-cluster service account, else KUBECONFIG."""
    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except ConfigException:
        await config.load_kube_config(
            config_file=os.environ.get("KUBECONFIG"), client_configuration=cfg
        )
    # Pods of many jobs are created concurrently; the default pool (4) serialises them.
    cfg.connection_pool_maxsize = pool_size
    if cfg.proxy is None:
        # The proxy variables (HTTPS_PROXY, NO_PROXY) are read once, here, by aiohttp's own
        # rules ...
        with contextlib.suppress(LookupError):
            proxy, auth = get_env_proxy_for_url(URL(cfg.host))
            cfg.proxy = str(proxy)
            if auth is not None:
                cfg.proxy_headers = {"Proxy-Authorization": auth.encode()}
    api = client.ApiClient(cfg)
    # ... and not on every request: the client's session trusts the environment, so aiohttp
    # looks up the proxy variables and ~/.netrc in a worker thread per request, two thread
    # hops that were a sixth of the operator's samples under load (docs/benchmarks.md).
    # The client offers no setting for it; aiohttp's session reads this flag per request.
    api.rest_client.pool_manager._trust_env = False
    return api


@dataclass
class Kube:
    """Typed entry points for the calls the operator makes."""

    api: client.ApiClient

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.events = client.EventsV1Api(self.api)

    async def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> bool:
        """Create a pod; False if it already exists (a retry after a crash).

        Strict field validation: a field the API server does not know (a misspelt
        `hostNetwrok` in the user's template) is refused (Invalid), never dropped.
        """
        API_REQUESTS.labels("create", "pods").inc()
        return await _create(
            self.core.create_namespaced_pod(
                namespace,
                pod,
                field_manager=FIELD_MANAGER,
                field_validation="Strict",
                _preload_content=False,
            )
        )

    async def create_service(self, namespace: str, service: Mapping[str, Any]) -> bool:
        API_REQUESTS.labels("create", "services").inc()
        return await _create(
            self.core.create_namespaced_service(
                namespace, service, field_manager=FIELD_MANAGER, _preload_content=False
            )
        )

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None) -> None:
        """Delete a pod; with `uid`, only that pod: names are reused once a pod is gone,
        and a delete by name alone could hit a newer pod of the same name (as the
        kubelet learned, kubernetes#25169). Already gone is not an error."""
        API_REQUESTS.labels("delete", "pods").inc()
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
        # Conflict: the UID precondition failed, so the pod meant is gone.
        with contextlib.suppress(NotFound, Conflict), domain_errors():
            resp = await self.core.delete_namespaced_pod(
                name, namespace, body=body if uid else None, _preload_content=False
            )
            await _read(resp)

    async def patch_job_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        """Merge-patch the status subresource (never the spec: GitOps sees no drift).

        With `resource_version` the write only happens if the job has not changed since
        that version (optimistic concurrency): Conflict otherwise.
        """
        API_REQUESTS.labels("patch", "multigpujobs/status").inc()
        body: dict[str, Any] = {"status": dict(patch)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        with domain_errors():
            resp = await self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                body,
                field_manager=FIELD_MANAGER,
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
            updated: dict[str, Any] = orjson.loads(await _read(resp))
        return updated

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        """Delete a job (and, by garbage collection, its children); only that very object:
        a job re-created under the same name has another UID and is left alone."""
        API_REQUESTS.labels("delete", "multigpujobs").inc()
        with contextlib.suppress(NotFound, Conflict), domain_errors():
            await self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                body={"preconditions": {"uid": uid}, "propagationPolicy": "Background"},
            )

    async def post_event(
        self, job: Mapping[str, Any], type_: str, reason: str, message: str
    ) -> None:
        """An events.k8s.io Event on the job; failures are logged, never raised."""
        API_REQUESTS.labels("create", "events").inc()
        meta = job["metadata"]
        instance = os.environ.get("HOSTNAME", "multigpu-operator")
        body = event_body(job, type_, reason, message, datetime.now(UTC), instance)
        try:
            with domain_errors():
                resp = await self.events.create_namespaced_event(
                    meta["namespace"], body, _preload_content=False
                )
                await _read(resp)
        except (NamespaceTerminating, NotFound) as err:
            # The namespace is going or gone, and the job with it: nobody reads this Event.
            log.debug("event %s on %s not posted: %s", reason, meta["name"], err.message)
        except ClusterError as err:
            log.warning("could not post event %s on %s: %s", reason, meta["name"], err.message)

    def _list_call(self, kind: str, namespace: str | None, **kwargs: Any) -> Any:
        if kind == "services":
            if namespace:
                return self.core.list_namespaced_service(namespace, **kwargs)
            return self.core.list_service_for_all_namespaces(**kwargs)
        if namespace:
            return self.core.list_namespaced_pod(namespace, **kwargs)
        return self.core.list_pod_for_all_namespaces(**kwargs)

    async def list_pods(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Pods matching `selector` (in one namespace or all), and the list's resourceVersion."""
        return await self._list("pods", selector, namespace)

    def watch_pods(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) for matching pods, from `resource_version`."""
        return self._watch("pods", selector, resource_version, namespace, timeout_seconds)

    async def list_services(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Services matching `selector`, and the list's resourceVersion."""
        return await self._list("services", selector, namespace)

    def watch_services(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) for matching Services."""
        return self._watch("services", selector, resource_version, namespace, timeout_seconds)

    async def _list(
        self, kind: str, selector: str, namespace: str | None
    ) -> tuple[list[dict[str, Any]], str]:
        API_REQUESTS.labels("list", kind).inc()
        with domain_errors():
            resp = await self._list_call(
                kind, namespace, label_selector=selector, _preload_content=False
            )
            data = orjson.loads(await resp.read())
        return data["items"], data["metadata"]["resourceVersion"]

    async def _watch(
        self,
        kind: str,
        selector: str,
        resource_version: str,
        namespace: str | None,
        timeout_seconds: int,
    ) -> AsyncIterator[dict[str, Any]]:
        API_REQUESTS.labels("watch", kind).inc()
        with domain_errors():
            resp = await self._list_call(
                kind,
                namespace,
                label_selector=selector,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=timeout_seconds + 30,
            )
        async for event in _watch_events(resp):
            yield event

    async def list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        """Every node, and the list's resourceVersion."""
        API_REQUESTS.labels("list", "nodes").inc()
        with domain_errors():
            resp = await self.core.list_node(_preload_content=False)
            data = orjson.loads(await resp.read())
        return data["items"], data["metadata"]["resourceVersion"]

    async def watch_nodes(
        self, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) of every node, from `resource_version`."""
        API_REQUESTS.labels("watch", "nodes").inc()
        with domain_errors():
            resp = await self.core.list_node(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=timeout_seconds + 30,
            )
        async for event in _watch_events(resp):
            yield event

    # Kueue's objects (kueue.x-k8s.io): Workloads, ResourceFlavors, priority classes.

    async def list_kueue(
        self, plural: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Kueue objects of one kind (in one namespace, all, or cluster-scoped), and the
        list's resourceVersion; NotFound when Kueue's CRDs are not installed."""
        API_REQUESTS.labels("list", plural).inc()
        with domain_errors():
            resp = await self._kueue_list_call(plural, namespace, _preload_content=False)
            data = json.loads(await resp.read())
        return data["items"], data["metadata"]["resourceVersion"]

    async def watch_kueue(
        self,
        plural: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) of one kind of Kueue object."""
        API_REQUESTS.labels("watch", plural).inc()
        with domain_errors():
            resp = await self._kueue_list_call(
                plural,
                namespace,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=timeout_seconds + 30,
            )
        async for event in _watch_events(resp):
            yield event

    def _kueue_list_call(self, plural: str, namespace: str | None, **kwargs: Any) -> Any:
        if namespace:
            return self.custom.list_namespaced_custom_object(
                kueue.GROUP, kueue.VERSION, namespace, plural, **kwargs
            )
        return self.custom.list_cluster_custom_object(kueue.GROUP, kueue.VERSION, plural, **kwargs)

    async def get_kueue(self, plural: str, name: str) -> dict[str, Any]:
        """One cluster-scoped Kueue object (a WorkloadPriorityClass); NotFound if absent."""
        API_REQUESTS.labels("get", plural).inc()
        with domain_errors():
            obj = await self.custom.get_cluster_custom_object(
                kueue.GROUP, kueue.VERSION, plural, name
            )
        return dict(obj)

    async def create_workload(self, namespace: str, workload: Mapping[str, Any]) -> bool:
        """Create a Workload; False if one of that name exists (a retry after a crash)."""
        API_REQUESTS.labels("create", kueue.WORKLOADS).inc()
        return await _create(
            self.custom.create_namespaced_custom_object(
                kueue.GROUP,
                kueue.VERSION,
                namespace,
                kueue.WORKLOADS,
                workload,
                field_manager=FIELD_MANAGER,
            )
        )

    async def patch_workload(
        self,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        resource_version: str | None,
        status: bool = False,
    ) -> None:
        """Merge-patch a Workload (its status subresource with `status`), only if it has
        not changed since `resource_version` (if given): Conflict otherwise."""
        API_REQUESTS.labels("patch", "workloads/status" if status else kueue.WORKLOADS).inc()
        body = dict(patch)
        if resource_version:
            body["metadata"] = {**patch.get("metadata", {}), "resourceVersion": resource_version}
        call = (
            self.custom.patch_namespaced_custom_object_status
            if status
            else self.custom.patch_namespaced_custom_object
        )
        with domain_errors():
            await call(
                kueue.GROUP,
                kueue.VERSION,
                namespace,
                kueue.WORKLOADS,
                name,
                body,
                field_manager=FIELD_MANAGER,
                _content_type="application/merge-patch+json",
            )


async def _watch_events(resp: Any) -> AsyncIterator[dict[str, Any]]:
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
                raise _status_error(event["object"], "watch error")
            yield event


async def _create(request: Awaitable[Any]) -> bool:
    try:
        with domain_errors():
            await _read(await request)
    except Conflict:
        return False
    return True


async def _read(resp: Any) -> bytes:
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
        raise _status_error({**status, "code": err.status}, str(err.reason)) from err


def _status_error(status: Mapping[str, Any], default: str) -> ClusterError:
    """The domain error for a Status object: its code, message and causes."""
    details = status.get("details") or {}
    causes = [str(c.get("reason", "")) for c in details.get("causes") or [] if isinstance(c, dict)]
    return from_status(status.get("code"), str(status.get("message", default)), causes)

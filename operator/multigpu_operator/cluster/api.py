"""The one module that talks to the API server (async, never blocking the loop).

`Kube` implements cluster.protocol.Cluster: everything above works on plain dicts, and
this module turns them into requests and every ApiException into the domain errors of
cluster/errors.py (the only place that reads the client's exceptions).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException
from yarl import URL

from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from multigpu_operator.cluster.answers import (
    FIELD_MANAGER,
    create,
    domain_errors,
    list_raw,
    read_body,
    watch_raw,
)
from multigpu_operator.cluster.errors import (
    ClusterError,
    Conflict,
    NamespaceTerminating,
    NotFound,
)
from multigpu_operator.cluster.events import event_body
from multigpu_operator.cluster.kueue_calls import KueueCalls
from multigpu_operator.metrics import API_REQUESTS

log = logging.getLogger(__name__)


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
    api = PlainBodyApiClient(cfg)
    # ... and not on every request: the client's session trusts the environment, so aiohttp
    # looks up the proxy variables and ~/.netrc in a worker thread per request, two thread
    # hops that were a sixth of the operator's samples under load (docs/benchmarks.md).
    # The client offers no setting for it; aiohttp's session reads this flag per request.
    api.rest_client.pool_manager._trust_env = False
    return api


class PlainBodyApiClient(client.ApiClient):  # type: ignore[misc]
    """Sends a dict body as it is: the operator's bodies are plain JSON values already,
    which the generated client would rebuild key by key, value by value, before encoding
    them (8% of the operator's CPU samples while it created pods, docs/benchmarks.md).
    Models (V1DeleteOptions) are still turned into dicts by the generated client."""

    def sanitize_for_serialization(self, obj: Any) -> Any:
        if isinstance(obj, dict):
            return obj
        return super().sanitize_for_serialization(obj)


@dataclass
class Kube(KueueCalls):
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
        return await create(
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
        return await create(
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
            await read_body(resp)

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
            updated: dict[str, Any] = orjson.loads(await read_body(resp))
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
                await read_body(resp)
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
        return await list_raw(
            kind, partial(self._list_call, kind, namespace, label_selector=selector)
        )

    def _watch(
        self,
        kind: str,
        selector: str,
        resource_version: str,
        namespace: str | None,
        timeout_seconds: int,
    ) -> AsyncIterator[dict[str, Any]]:
        call = partial(self._list_call, kind, namespace, label_selector=selector)
        return watch_raw(kind, call, resource_version, timeout_seconds)

    async def list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        """Every node, and the list's resourceVersion."""
        return await list_raw("nodes", self.core.list_node)

    def watch_nodes(
        self, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) of every node, from `resource_version`."""
        return watch_raw("nodes", self.core.list_node, resource_version, timeout_seconds)

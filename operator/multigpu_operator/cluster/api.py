"""The one module that talks to the API server (async, never blocking the loop).

`Kube` implements cluster.protocol.Cluster: everything above works on plain dicts, and
this module turns them into requests over cluster/rest.py, whose error answers are the
domain errors of cluster/errors.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from multigpu_operator.cluster.answers import (
    FIELD_MANAGER,
    collection,
    create,
    list_raw,
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
from multigpu_operator.cluster.rest import MERGE_PATCH, Login, Rest
from multigpu_operator.metrics import api_request

log = logging.getLogger(__name__)


async def connect(login: Login, pool_size: int = 64) -> Rest:
    """A client of the API server on the credentials `login` gives (kopf's login: the
    service account in a pod, else the kubeconfig); made in the event loop it serves."""
    return Rest(login, pool_size)


@dataclass
class Kube(KueueCalls):
    """Typed entry points for the calls the operator makes."""

    rest: Rest

    async def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> bool:
        """Create a pod; False if it already exists (a retry after a crash).

        Strict field validation: a field the API server does not know (a misspelt
        `hostNetwrok` in the user's template) is refused (Invalid), never dropped.
        """
        path = collection("", "v1", "pods", namespace)
        with api_request("create", "pods"):
            return await create(self.rest, path, pod, {"fieldValidation": "Strict"})

    async def dry_run_pod(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Send `pod` as create_pod does, as a server-side dry run: checked by validation
        and admission as a create, stored nowhere (policy/template_check.py)."""
        path = collection("", "v1", "pods", namespace)
        with api_request("dry-run", "pods"):
            await create(self.rest, path, pod, {"fieldValidation": "Strict", "dryRun": "All"})

    async def create_service(self, namespace: str, service: Mapping[str, Any]) -> bool:
        with api_request("create", "services"):
            return await create(self.rest, collection("", "v1", "services", namespace), service)

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None) -> None:
        """Delete a pod; with `uid`, only that pod: names are reused once a pod is gone,
        and a delete by name alone could hit a newer pod of the same name (as the
        kubelet learned, kubernetes#25169). Already gone is not an error."""
        body = {"preconditions": {"uid": uid}} if uid else None
        # Conflict: the UID precondition failed, so the pod meant is gone.
        with contextlib.suppress(NotFound, Conflict), api_request("delete", "pods"):
            path = f"{collection('', 'v1', 'pods', namespace)}/{name}"
            await self.rest.call("DELETE", path, body=body)

    async def patch_job_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        """Merge-patch the status subresource (never the spec: GitOps sees no drift).

        With `resource_version` the write only happens if the job has not changed since
        that version (optimistic concurrency): Conflict otherwise. Strict field
        validation, as for pods: a status field the CRD does not declare is refused
        (Invalid), never dropped with a warning nobody reads.
        """
        body: dict[str, Any] = {"status": dict(patch)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        path = f"{collection(GROUP, VERSION, PLURAL, namespace)}/{name}/status"
        params = {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"}
        with api_request("patch", "multigpujobs/status"):
            return await self.rest.json("PATCH", path, params, body, MERGE_PATCH)

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        """Delete a job (and, by garbage collection, its children); only that very object:
        a job re-created under the same name has another UID and is left alone."""
        body = {"preconditions": {"uid": uid}, "propagationPolicy": "Background"}
        with contextlib.suppress(NotFound, Conflict), api_request("delete", "multigpujobs"):
            path = f"{collection(GROUP, VERSION, PLURAL, namespace)}/{name}"
            await self.rest.call("DELETE", path, body=body)

    async def post_event(
        self, job: Mapping[str, Any], type_: str, reason: str, message: str
    ) -> None:
        """An events.k8s.io Event on the job; failures are logged, never raised."""
        meta = job["metadata"]
        instance = os.environ.get("HOSTNAME", "multigpu-operator")
        body = event_body(job, type_, reason, message, datetime.now(UTC), instance)
        path = collection("events.k8s.io", "v1", "events", meta["namespace"])
        try:
            with api_request("create", "events"):
                await self.rest.call("POST", path, body=body)
        except (NamespaceTerminating, NotFound) as err:
            # The namespace is going or gone, and the job with it: nobody reads this Event.
            log.debug("event %s on %s not posted: %s", reason, meta["name"], err.message)
        except ClusterError as err:
            log.warning("could not post event %s on %s: %s", reason, meta["name"], err.message)

    async def list_pods(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Pods matching `selector` (in one namespace or all), and the list's resourceVersion."""
        return await list_raw(self.rest, "pods", collection("", "v1", "pods", namespace), selector)

    def watch_pods(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) for matching pods, from `resource_version`."""
        path = collection("", "v1", "pods", namespace)
        return watch_raw(self.rest, "pods", path, resource_version, timeout_seconds, selector)

    async def list_services(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Services matching `selector`, and the list's resourceVersion."""
        path = collection("", "v1", "services", namespace)
        return await list_raw(self.rest, "services", path, selector)

    def watch_services(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) for matching Services."""
        path = collection("", "v1", "services", namespace)
        return watch_raw(self.rest, "services", path, resource_version, timeout_seconds, selector)

    async def list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        """Every node, and the list's resourceVersion."""
        return await list_raw(self.rest, "nodes", collection("", "v1", "nodes"))

    def watch_nodes(
        self, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) of every node, from `resource_version`."""
        path = collection("", "v1", "nodes")
        return watch_raw(self.rest, "nodes", path, resource_version, timeout_seconds)

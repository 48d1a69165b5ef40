"""The calls the controller makes to the API server, as a Protocol.

`cluster.api.Kube` is the real implementation; tests pass an in-memory one
(tests/support/fake_cluster.py). Objects go in and out as plain JSON-ready dicts.
Errors are those of cluster/errors.py, never the client library's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol


class Cluster(Protocol):
    async def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> bool:
        """Create a pod; False if one of that name exists (a retry after a crash).
        Raises Invalid with the server's message when the pod is rejected (unknown
        fields included: strict field validation), a Forbidden when admission refuses it."""
        ...

    async def dry_run_pod(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Have the server check `pod` as create_pod would (validation, strict fields,
        admission) without storing it (dryRun=All). Raises as create_pod; a pod of that
        name existing is no error."""
        ...

    async def create_service(self, namespace: str, service: Mapping[str, Any]) -> bool:
        """Create a Service; False if one of that name exists. Raises as create_pod."""
        ...

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None) -> None:
        """Delete a pod; with `uid`, only that very pod. Already gone is not an error."""
        ...

    async def patch_job_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        """Merge-patch a job's status subresource and return the updated job. With
        `resource_version`, raises Conflict if the job changed since that version;
        Invalid if the server refuses the status (strict field validation included)."""
        ...

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        """Delete a job, only if it still has `uid`. Already gone is not an error."""
        ...

    async def post_event(
        self, job: Mapping[str, Any], type_: str, reason: str, message: str
    ) -> None:
        """Post an Event on the job; failures are logged, never raised."""
        ...

    async def list_pods(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Pods matching the label `selector` (one namespace, or all), and the list's
        resourceVersion to watch from."""
        ...

    def watch_pods(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events ({type, object}) of matching pods after `resource_version`, until
        the server ends the watch; raises Gone when that version is too old."""
        ...

    async def list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        """Every node of the cluster, and the list's resourceVersion to watch from."""
        ...

    def watch_nodes(
        self, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events ({type, object}) of every node after `resource_version`, until the
        server ends the watch; raises Gone when that version is too old."""
        ...

    async def list_services(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Services matching the label `selector`, and the list's resourceVersion."""
        ...

    def watch_services(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events of matching Services, as watch_pods."""
        ...

    # Kueue (kueue.x-k8s.io/v1beta2): only called when the operator queues jobs in Kueue.

    async def list_kueue(
        self, plural: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Kueue objects of one kind (`plural`), and the list's resourceVersion; NotFound
        when Kueue's CRDs are not installed."""
        ...

    def watch_kueue(
        self,
        plural: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events of one kind of Kueue object, as watch_pods."""
        ...

    async def get_kueue(self, plural: str, name: str) -> dict[str, Any]:
        """One cluster-scoped Kueue object (a WorkloadPriorityClass); NotFound if absent."""
        ...

    async def create_workload(self, namespace: str, workload: Mapping[str, Any]) -> bool:
        """Create a Workload; False if one of that name exists."""
        ...

    async def patch_workload(
        self,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        resource_version: str | None,
        status: bool = False,
    ) -> None:
        """Merge-patch a Workload (with `status`, its status subresource), only if it has
        not changed since `resource_version` (if given): Conflict otherwise."""
        ...

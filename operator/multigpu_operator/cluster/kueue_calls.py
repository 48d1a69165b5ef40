"""The calls on Kueue's objects (kueue.x-k8s.io): Workloads, ResourceFlavors and
WorkloadPriorityClasses, as part of cluster/api.py's `Kube`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from multigpu_operator.api import kueue
from multigpu_operator.cluster.answers import (
    FIELD_MANAGER,
    collection,
    create,
    list_raw,
    watch_raw,
)
from multigpu_operator.cluster.rest import MERGE_PATCH, Rest
from multigpu_operator.metrics import api_request


def _path(plural: str, namespace: str | None = None) -> str:
    return collection(kueue.GROUP, kueue.VERSION, plural, namespace)


class KueueCalls:
    """Kueue's objects, through the client of `Kube`."""

    rest: Rest

    async def list_kueue(
        self, plural: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Kueue objects of one kind (in one namespace, all, or cluster-scoped), and the
        list's resourceVersion; NotFound when Kueue's CRDs are not installed."""
        return await list_raw(self.rest, plural, _path(plural, namespace))

    def watch_kueue(
        self,
        plural: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) of one kind of Kueue object."""
        path = _path(plural, namespace)
        return watch_raw(self.rest, plural, path, resource_version, timeout_seconds)

    async def get_kueue(self, plural: str, name: str) -> dict[str, Any]:
        """One cluster-scoped Kueue object (a WorkloadPriorityClass); NotFound if absent."""
        with api_request("get", plural):
            return await self.rest.json("GET", f"{_path(plural)}/{name}")

    async def create_workload(self, namespace: str, workload: Mapping[str, Any]) -> bool:
        """Create a Workload; False if one of that name exists (a retry after a crash)."""
        with api_request("create", kueue.WORKLOADS):
            return await create(self.rest, _path(kueue.WORKLOADS, namespace), workload)

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
        body = dict(patch)
        if resource_version:
            body["metadata"] = {**patch.get("metadata", {}), "resourceVersion": resource_version}
        path = f"{_path(kueue.WORKLOADS, namespace)}/{name}" + ("/status" if status else "")
        params = {"fieldManager": FIELD_MANAGER}
        with api_request("patch", "workloads/status" if status else kueue.WORKLOADS):
            await self.rest.call("PATCH", path, params, body, MERGE_PATCH)

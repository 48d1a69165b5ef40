"""The calls on Kueue's objects (kueue.x-k8s.io): Workloads, ResourceFlavors and
WorkloadPriorityClasses, as part of cluster/api.py's `Kube`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from functools import partial
from typing import Any

from kubernetes_asyncio import client

from multigpu_operator.api import kueue
from multigpu_operator.cluster.answers import (
    FIELD_MANAGER,
    create,
    domain_errors,
    list_raw,
    watch_raw,
)
from multigpu_operator.metrics import API_REQUESTS


class KueueCalls:
    """Kueue's objects, through the custom objects API of `Kube`."""

    custom: client.CustomObjectsApi

    async def list_kueue(
        self, plural: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Kueue objects of one kind (in one namespace, all, or cluster-scoped), and the
        list's resourceVersion; NotFound when Kueue's CRDs are not installed."""
        return await list_raw(plural, partial(self._kueue_list_call, plural, namespace))

    def watch_kueue(
        self,
        plural: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events ({type, object}) of one kind of Kueue object."""
        call = partial(self._kueue_list_call, plural, namespace)
        return watch_raw(plural, call, resource_version, timeout_seconds)

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
        return await create(
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

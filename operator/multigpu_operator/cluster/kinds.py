"""The kinds of object the operator reads and writes, as the API server addresses them.

A Kind is where its objects live (group, version, plural, namespaced or not) and how the
operator writes them: with `strict`, a write uses strict field validation, so a field the
schema lacks is refused (422) instead of dropped with a warning nobody reads. The verbs
of cluster/protocol.py take one; the plural, with a subresource, is the `resource` label
of mgj_api_requests_total.
"""

from __future__ import annotations

from dataclasses import dataclass

from multigpu_operator.api import kueue, runtime, spec


@dataclass(frozen=True)
class Kind:
    group: str  # "" is the core group
    version: str
    plural: str
    namespaced: bool = True
    strict: bool = False

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """The collection (in one namespace, across all, or cluster-scoped), or with
        `name` one object, or with `subresource` one of its subresources."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{namespace}" if namespace and self.namespaced else ""
        path = f"{root}{where}/{self.plural}"
        if name is not None:
            path += f"/{name}"
        return f"{path}/{subresource}" if subresource else path


# Strict: a pod template is the user's, a job's status the operator's own schema.
PODS = Kind("", "v1", "pods", strict=True)
SERVICES = Kind("", "v1", "services")
NODES = Kind("", "v1", "nodes", namespaced=False)
JOBS = Kind(spec.GROUP, spec.VERSION, spec.PLURAL, strict=True)
EVENTS = Kind("events.k8s.io", "v1", "events")
LEASES = Kind("coordination.k8s.io", "v1", "leases")
WORKLOADS = Kind(kueue.GROUP, kueue.VERSION, kueue.WORKLOADS)
RESOURCE_FLAVORS = Kind(kueue.GROUP, kueue.VERSION, kueue.RESOURCE_FLAVORS, namespaced=False)
WORKLOAD_PRIORITY_CLASSES = Kind(
    kueue.GROUP, kueue.VERSION, kueue.WORKLOAD_PRIORITY_CLASSES, namespaced=False
)
RUNTIMES = Kind(spec.GROUP, spec.VERSION, runtime.RUNTIME_PLURAL)
CLUSTER_RUNTIMES = Kind(spec.GROUP, spec.VERSION, runtime.CLUSTER_RUNTIME_PLURAL, namespaced=False)

"""The runtimes jobs name in spec.runtimeRef (api/runtime.py), kept by two Reflectors
(cluster/reflector.py): every ClusterMultiGPURuntime, and the MultiGPURuntimes of the
operator's namespaces.

Each runtime is kept trimmed to its identity and spec. A runtime that appears or changes
wakes the jobs that name it and have not started with it yet (a job that started keeps
the copy in its status), so a job applied before its runtime starts once it exists: a
GitOps sync may apply them in any order.

Without the runtimes' CRDs (an older chart) or the right to read them, the stores stay
empty and a job that names a runtime waits, saying which.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from multigpu_operator.api.runtime import CLUSTER_RUNTIME_KIND, RUNTIME_KIND
from multigpu_operator.cluster.errors import ClusterError
from multigpu_operator.cluster.kinds import CLUSTER_RUNTIMES, RUNTIMES, Kind
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.reflector import Reflected, Reflector

log = logging.getLogger(__name__)

Runtime = dict[str, Any]
# (kind, namespace or "", name)
RuntimeKey = tuple[str, str, str]
# Called with a runtime that appeared, changed or went away.
OnChange = Callable[[RuntimeKey], None]


def trim_runtime(runtime: Mapping[str, Any]) -> Runtime:
    """Keep what a job's pass reads: the name, generation and spec."""
    meta = runtime["metadata"]
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "generation") if k in meta}
    return {"metadata": kept, "spec": dict(runtime.get("spec") or {})}


class _Store(Reflected):
    def __init__(
        self, cluster: Cluster, kind: Kind, name: str, namespace: str | None, on_change: OnChange
    ) -> None:
        self.objects: dict[RuntimeKey, Runtime] = {}
        self.unreadable = False  # a list or watch failed: the kind may not be served
        self._name = name
        self._on_change = on_change
        self.reflector = Reflector(
            name,
            lambda: cluster.list(kind, namespace),
            lambda rv: cluster.watch(kind, rv, namespace),
            trim_runtime,
            self,
            backoff_cap=300,
            on_failure=self._cannot_read,
        )

    def key(self, runtime: Runtime) -> RuntimeKey:
        meta = runtime["metadata"]
        return (self._name, meta.get("namespace", ""), meta["name"])

    def replace(self, objects: list[Runtime]) -> None:
        before, self.objects = self.objects, {self.key(r): r for r in objects}
        for key in before.keys() | self.objects.keys():
            if before.get(key) != self.objects.get(key):
                self._on_change(key)

    def apply(self, event: str, runtime: Runtime) -> None:
        key = self.key(runtime)
        if event == "DELETED":
            self.objects.pop(key, None)
        elif self.objects.get(key) == runtime:
            return
        else:
            self.objects[key] = runtime
        self._on_change(key)

    def _cannot_read(self, err: ClusterError, failures: int, retry_in: float) -> bool:
        # Not served (an older chart's CRDs) or not allowed: jobs naming a runtime wait,
        # saying which. A busy server (429, a timeout) is only retried.
        lasting = err.status in (403, 404)
        self.unreadable = self.unreadable or lasting
        if lasting and failures == 1:
            log.warning(
                "cannot read %ss (%s): jobs naming one wait until this heals",
                self._name,
                err.message,
            )
        return True


class RuntimeInformer:
    """Both kinds of runtime; `on_change` hears of each that appears, changes or goes."""

    def __init__(self, cluster: Cluster, on_change: OnChange, namespace: str | None) -> None:
        self.cluster = _Store(cluster, CLUSTER_RUNTIMES, CLUSTER_RUNTIME_KIND, None, on_change)
        self.namespaced = _Store(cluster, RUNTIMES, RUNTIME_KIND, namespace, on_change)

    @property
    def stores(self) -> tuple[Reflected, Reflected]:
        return (self.cluster, self.namespaced)

    def listed(self) -> bool:
        """Whether both kinds were listed (or cannot be: then jobs wait, saying why)."""
        return all(s.synced.is_set() or s.unreadable for s in (self.cluster, self.namespaced))

    def get(self, kind: str, namespace: str, name: str) -> Runtime | None:
        """The runtime a job in `namespace` names, if it exists (as last seen)."""
        if kind == CLUSTER_RUNTIME_KIND:
            return self.cluster.objects.get((kind, "", name))
        return self.namespaced.objects.get((kind, namespace, name))


def names_runtime(job: Mapping[str, Any], runtime: RuntimeKey) -> bool:
    """Whether the job `job` names `runtime` in its spec.runtimeRef."""
    ref = (job.get("spec") or {}).get("runtimeRef")
    if not isinstance(ref, Mapping):
        return False
    kind, namespace, name = runtime
    if (ref.get("kind") or CLUSTER_RUNTIME_KIND, ref.get("name")) != (kind, name):
        return False
    return kind == CLUSTER_RUNTIME_KIND or job["metadata"].get("namespace") == namespace

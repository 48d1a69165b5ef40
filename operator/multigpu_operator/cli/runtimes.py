"""The runtimes `mgj render` and `mgj run` merge jobs with (docs/runtimes.md): a runtime
document among the files read (the job's own file or directory, or --runtimes FILE|DIR),
else the cluster's, asked through the kubeconfig (only when a job names a runtime no
file has: offline commands stay offline otherwise). The merge is the operator's own
(api/runtime_merge.py), on the job as the API server stores it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from multigpu_operator.api.runtime import CLUSTER_RUNTIME_KIND, RuntimeRef
from multigpu_operator.api.runtime_merge import RuntimeProblems, merged_job
from multigpu_operator.cluster.errors import ClusterError, NotFound

if TYPE_CHECKING:
    from multigpu_operator.cluster.protocol import Cluster

# (kind, namespace, name) -> the runtime, None if there is none; raises LookupError
# with a message when it cannot tell.
Finder = Callable[[str, str, str], Mapping[str, Any] | None]


def from_documents(documents: list[Any]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    """The runtimes among `documents`, by (kind, namespace, name); a namespaced runtime
    without a namespace is in whatever namespace its jobs are rendered in ("")."""
    found = {}
    for doc in documents:
        meta = doc.get("metadata") or {}
        namespace = "" if doc["kind"] == CLUSTER_RUNTIME_KIND else meta.get("namespace", "")
        found[doc["kind"], namespace, str(meta.get("name"))] = doc
    return found


def finder(documents: list[Any], cluster: Cluster | None, ask_cluster: bool = True) -> Finder:
    """Runtimes from `documents` first, else from `cluster` (else the kubeconfig's)."""
    given = from_documents(documents)

    def find(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        for where in ((kind, namespace, name), (kind, "", name)):
            if where in given:
                return given[where]
        if not ask_cluster:
            return None
        try:
            return _from_cluster(cluster, kind, namespace, name)
        except ClusterError as err:
            raise LookupError(
                f"{kind} {name} is in no file given (--runtimes FILE) and the cluster could "
                f"not be asked: {err}"
            ) from err

    return find


def _from_cluster(
    cluster: Cluster | None, kind: str, namespace: str, name: str
) -> Mapping[str, Any] | None:
    # Only here: the offline commands need no HTTP client.
    from multigpu_operator.client import kubeconfig_login, run_with
    from multigpu_operator.cluster.kinds import CLUSTER_RUNTIMES, RUNTIMES

    which = CLUSTER_RUNTIMES if kind == CLUSTER_RUNTIME_KIND else RUNTIMES

    async def get(kube: Cluster) -> Mapping[str, Any] | None:
        try:
            return await kube.get(which, namespace if which.namespaced else None, name)
        except NotFound:
            return None

    return run_with(cluster, kubeconfig_login(), get)


def resolve(stored: Mapping[str, Any], namespace: str, find: Finder) -> Any:
    """The job `stored` (as the API server stores it) merged with the runtime it names,
    or what is wrong, one line per field; a job that names none as it is."""
    raw = (stored.get("spec") or {}).get("runtimeRef")
    if raw is None:
        return stored
    ref = RuntimeRef.model_validate(raw)
    named = f"{ref.kind} {ref.name}"
    try:
        runtime = find(ref.kind, namespace, ref.name)
    except LookupError as err:
        return [f"spec.runtimeRef: {err}"]
    if runtime is None:
        where = "" if ref.kind == CLUSTER_RUNTIME_KIND else f" in namespace {namespace}"
        return [f"spec.runtimeRef: {named} does not exist{where}"]
    try:
        return merged_job(stored, runtime.get("spec") or {}, named)
    except RuntimeProblems as err:
        return [str(p) for p in err.problems]

"""`mgj render --server`: each MultiGPUJob created as a server-side dry run (nothing is
stored), so that the API server validates it with its own words: strict field
validation, the CRD's schema and CEL rules, admission. Through the Cluster verbs
(cluster/protocol.py) the operator uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from multigpu_operator.cluster.errors import ClusterError, Invalid
from multigpu_operator.cluster.kinds import JOBS
from multigpu_operator.cluster.protocol import Cluster


async def dry_run_jobs(
    cluster: Cluster, manifests: Sequence[Mapping[str, Any]], namespace: str
) -> list[dict[str, Any] | str]:
    """Each manifest as the API server would store it in `namespace` (unless it names
    its own), or the server's words refusing it. A failure to reach the server raises
    ClusterError."""
    return [await _dry_run(cluster, manifest, namespace) for manifest in manifests]


async def _dry_run(
    cluster: Cluster, manifest: Mapping[str, Any], namespace: str
) -> dict[str, Any] | str:
    meta = manifest.get("metadata") or {}
    try:
        stored = await cluster.create(JOBS, meta.get("namespace") or namespace, manifest, True)
    except Invalid as refused:
        return str(refused)
    except ClusterError as err:
        if err.status in (403, 404):  # admission, no such namespace
            return str(err)
        raise
    if stored is None:  # a job of that name exists: the server's AlreadyExists
        return f'{JOBS.plural}.{JOBS.group} "{meta.get("name")}" already exists'
    return stored

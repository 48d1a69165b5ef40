"""`mgj render --server`: each MultiGPUJob created as a server-side dry run (nothing is
stored), so that the API server validates it with its own words: strict field
validation, the CRD's schema and CEL rules, admission. Through the operator's own HTTP
client (cluster/rest.py), which the command line has at hand without the test-only
`kubernetes` package; a few requests, so one short event loop per command."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from multigpu_operator.cluster.errors import ClusterError, Invalid
from multigpu_operator.cluster.kinds import JOBS
from multigpu_operator.cluster.rest import Login, Rest

DRY_RUN = {"dryRun": "All", "fieldValidation": "Strict"}


def dry_run_jobs(
    login: Login, manifests: Sequence[Mapping[str, Any]], namespace: str
) -> list[dict[str, Any] | str]:
    """Each manifest as the API server would store it in `namespace` (unless it names
    its own), or the server's words refusing it. A failure to reach the server raises
    ClusterError."""
    return asyncio.run(_dry_run_all(login, manifests, namespace))


async def _dry_run_all(
    login: Login, manifests: Sequence[Mapping[str, Any]], namespace: str
) -> list[dict[str, Any] | str]:
    rest = Rest(login, pool_size=4)
    try:
        return [await _dry_run(rest, manifest, namespace) for manifest in manifests]
    finally:
        await rest.close()


async def _dry_run(rest: Rest, manifest: Mapping[str, Any], namespace: str) -> dict[str, Any] | str:
    where = (manifest.get("metadata") or {}).get("namespace") or namespace
    try:
        answer = await rest.call("POST", JOBS.path(where), DRY_RUN, manifest)
    except Invalid as refused:
        return str(refused)
    except ClusterError as err:
        if err.status in (400, 403, 404, 409):  # malformed, admission, no namespace, exists
            return str(err)
        raise
    stored: dict[str, Any] = orjson.loads(answer)
    return stored

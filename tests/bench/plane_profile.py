"""The API server's own CPU profile while a phase's jobs are submitted: Go's pprof, served
by kube-apiserver at /debug/pprof (on unless --profiling=false), read with
`go tool pprof -top FILE`. Where the control plane's time goes is the half of a job's
wait the operator's own profile (sampling.py) cannot show."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cluster.localcluster import LocalCluster


def start(cluster: LocalCluster, path: Path, seconds: int) -> asyncio.Task[None]:
    """Record `seconds` of the API server's CPU profile into `path`, from now."""
    return asyncio.create_task(_record(cluster, path, seconds))


async def _record(cluster: LocalCluster, path: Path, seconds: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            str(cluster.tools.kubectl),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "get",
            "--raw",
            f"/debug/pprof/profile?seconds={seconds}",
            stdout=out,
        )
        await proc.wait()

"""A control plane of a test module's own, for tests that would disturb the shared one
(stopping its API server) or see other tests' jobs (a cluster-wide operator)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster.localcluster import LocalCluster
from cluster.tools import build_tools

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def own_cluster(name: str) -> Iterator[LocalCluster]:
    """One simulated CPU node, no real node, the MultiGPUJob CRD installed; stopped
    afterwards, also when its set-up fails half-way."""
    cluster = LocalCluster(build_tools(), name)
    try:
        cluster.up(gpu_nodes=0, cpu_nodes=1, real_node=False, pull_images=False)
        cluster.install_crds(REPO / "manifests/crd")
        yield cluster
    finally:
        cluster.down()

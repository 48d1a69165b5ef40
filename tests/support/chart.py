"""The Helm chart (charts/multigpu-operator) as tests see it: rendered, installed, removed."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from cluster.localcluster import LocalCluster
from cluster.tools import Tools

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts/multigpu-operator"
# Every optional part on, with non-default settings (chart-testing's ci/ convention).
ALL_ENABLED_VALUES = CHART / "ci/all-enabled-values.yaml"
# A release called like the chart gets plain names: multigpu-operator, multigpu-operator-metrics.
RELEASE = "multigpu-operator"
NAMESPACE = "multigpu-system"

Manifest = dict[str, Any]


def helm(tools: Tools, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tools.helm), *args], capture_output=True, text=True, check=check)


def render(
    tools: Tools,
    *args: str,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> list[Manifest]:
    """`helm template` of the chart; `args` adds values (-f FILE, --set k=v) or flags."""
    out = helm(tools, "template", release, str(CHART), "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def find(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [obj for obj in objects if obj["kind"] == kind]


def only(objects: list[Manifest], kind: str) -> Manifest:
    found = find(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


@contextmanager
def installed(
    cluster: LocalCluster, tools: Tools, release: str, namespace: str, *args: str
) -> Iterator[None]:
    """`helm install` into `namespace`, uninstalled afterwards: the ClusterRole and its
    binding are cluster-scoped and would outlive the test's namespace."""
    kubeconfig = ("--kubeconfig", str(cluster.kubeconfig))
    helm(tools, "install", release, str(CHART), "--namespace", namespace, *kubeconfig, *args)
    try:
        yield
    finally:
        helm(tools, "uninstall", release, "--namespace", namespace, *kubeconfig, check=False)

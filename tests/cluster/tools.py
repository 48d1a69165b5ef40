"""The binaries the local cluster runs, built from pinned Go modules by build-tools.sh
into a cache outside the repository, and where that cache is."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """The cache outside the repository that holds binaries and cluster state."""
    if env := os.environ.get("MGJ_CACHE_DIR"):
        return Path(env)
    return default_cache_dir()


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "multigpu-operator"


@dataclass(frozen=True)
class Tools:
    """Paths of the binaries built by build-tools.sh."""

    k8s_bin: Path
    k8s_version: str
    etcd_bin: Path
    kwok_bin: Path
    helm_bin: Path
    promtool_bin: Path
    prometheus_bin: Path
    prometheus_version: str  # the release (v3.x.y), not the Go module's version
    prometheus_operator_bin: Path  # operator, prometheus-config-reloader
    prometheus_operator_version: str
    node_bin: Path  # kubelet, kube-proxy
    coredns_bin: Path
    pause_bin: Path
    kueue_bin: Path
    registry_bin: Path  # the CNCF Distribution registry (registry.py)

    @property
    def kubectl(self) -> Path:
        return self.k8s_bin / "kubectl"

    @property
    def kwokctl(self) -> Path:
        return self.kwok_bin / "kwokctl"

    @property
    def helm(self) -> Path:
        return self.helm_bin / "helm"

    @property
    def promtool(self) -> Path:
        return self.promtool_bin / "promtool"

    @property
    def path_entries(self) -> list[Path]:
        """Directories to put on PATH so kubectl, helm, promtool resolve to ours."""
        return [self.k8s_bin, self.etcd_bin, self.kwok_bin, self.helm_bin, self.promtool_bin]


# Built only for the few tests that use them (build-tools.sh --core leaves them out).
LATE_TOOLS = ("kueue", "promtool", "prometheus", "prometheus-operator")


def build_tools(*late: str, only: bool = False) -> Tools:
    """Build (or find in the cache) the cluster's binaries and the `late` ones named
    (LATE_TOOLS), or with `only` just the tools named; raises with the failing step. Every
    path is filled in, built or not."""
    proc = subprocess.run(
        ["bash", str(HERE / "build-tools.sh"), "--only" if only else "--core", *late],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError("building the control plane failed; see build-tools output above")
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return Tools(
        k8s_bin=Path(values["K8S_BIN"]),
        k8s_version=values["K8S_VERSION"],
        etcd_bin=Path(values["ETCD_BIN"]),
        kwok_bin=Path(values["KWOK_BIN"]),
        helm_bin=Path(values["HELM_BIN"]),
        promtool_bin=Path(values["PROMTOOL_BIN"]),
        prometheus_bin=Path(values["PROMETHEUS_BIN"]),
        prometheus_version=values["PROMETHEUS_VERSION"],
        prometheus_operator_bin=Path(values["PROMETHEUS_OPERATOR_BIN"]),
        prometheus_operator_version=values["PROMETHEUS_OPERATOR_VERSION"],
        node_bin=Path(values["NODE_BIN"]),
        coredns_bin=Path(values["COREDNS_BIN"]),
        pause_bin=Path(values["PAUSE_BIN"]),
        kueue_bin=Path(values["KUEUE_BIN"]),
        registry_bin=Path(values["REGISTRY_BIN"]),
    )


def start_late_build(late: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Build the `late` tools in the background (a test session starts this early so that
    they compile while other tests run); their first user waits on build-tools.sh's lock."""
    with log.open("ab") as out:
        return subprocess.Popen(
            ["bash", str(HERE / "build-tools.sh"), "--only", *late],
            stdout=subprocess.DEVNULL,
            stderr=out,
            start_new_session=True,
        )


def module_dir(pinned_in: str, module: str) -> Path:
    """The source of `module` as pinned under tests/cluster/go/`pinned_in` (CRDs and
    manifests ship in Go modules), as build-tools.sh downloaded it."""
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", module],
        cwd=Path(__file__).resolve().parent / "go" / pinned_in,
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(out.stdout.strip())

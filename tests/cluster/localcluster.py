"""A local Kubernetes control plane with simulated GPU nodes and one real node, for tests
and the demo.

Real kube-apiserver, etcd, kube-scheduler and kube-controller-manager, started
by kwokctl's binary runtime from binaries that ``build-tools.sh`` built from
pinned Go modules; kwok simulates the GPU nodes and their pods' lifecycle, and a real
kubelet with containerd (realnode.py) runs real pods beside them, pulling their images from
the machine's registry (registry.py), which runs while a cluster with a real node does. The
control plane listens on 127.0.0.1 only; the real node reaches it through its own network
namespace.
The binaries come from tools.py (build-tools.sh), the simulated nodes' objects from
node_manifests.py.

Command line::

    python tests/cluster/localcluster.py up [--gpu-nodes 4 --gpus-per-node 8] [--no-real-node]
    python tests/cluster/localcluster.py down [--all]
    python tests/cluster/localcluster.py kubeconfig
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `cluster.*` when run as a script

from cluster.kwok_config import kwokctl_documents
from cluster.node_manifests import cpu_node, gpu_node
from cluster.progress import ticking
from cluster.realnode_config import NodeLayout
from cluster.registry import Registry
from cluster.tools import Tools, build_tools, cache_dir, default_cache_dir

if TYPE_CHECKING:
    from cluster.realnode import RealNode

DEFAULT_NAME = "mgj"
# The test suite has a cluster of its own, so jobs left on the default one (by `make demo`
# or by hand) never hold the GPUs its tests count on.
TEST_NAME = "mgj-test"
# The second test cluster, simulated nodes only, for the modules `make test` runs beside
# the shared cluster's (tests/support/suite_scopes.py).
SIMULATED_NAME = "mgj-test-sim"
# The MultiKueue manager cluster of tests/integration/test_multikueue.py (TEST_NAME is
# its worker).
MANAGER_NAME = "mgj-manager"


CONTROL_PLANE_COMPONENTS = ("kube-controller-manager", "kube-scheduler", "kwok-controller")


@dataclass(frozen=True)
class LocalCluster:
    """One kwokctl cluster with its state under the cache directory."""

    tools: Tools
    name: str = DEFAULT_NAME

    @property
    def workdir(self) -> Path:
        return cache_dir() / "kwok"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "clusters" / self.name / "kubeconfig.yaml"

    def component_log(self, component: str) -> Path:
        """Where kwokctl writes a component's output (kube-apiserver, kwok-controller, ...)."""
        return self.kubeconfig.parent / "logs" / f"{component}.log"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KWOK_WORKDIR"] = str(self.workdir)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = os.pathsep.join([*map(str, self.tools.path_entries), env.get("PATH", "")])
        return env

    def kwokctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.tools.kwokctl), "--name", self.name, *args],
            env=self.env(),
            text=True,
            capture_output=True,
            check=check,
        )

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.tools.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            text=True,
            capture_output=True,
            check=check,
        )

    def install_crds(self, path: Path, timeout: float = 90) -> None:
        """Apply CRDs server-side (large schemas exceed client-side apply's annotation) and
        wait until every CRD is Established, trying again until `timeout`: right after a
        cluster's start on a busy machine the wait once failed for a CRD that was
        Established moments later. A last failure carries kubectl's own words."""
        source = "-k" if (path / "kustomization.yaml").exists() else "-f"
        deadline = time.monotonic() + timeout
        while True:
            answer = self.kubectl(
                "apply", "--server-side", "--force-conflicts", source, str(path), check=False
            )
            if answer.returncode == 0:
                answer = self.kubectl(
                    "wait", "--for=condition=Established", "--timeout=30s", "crd", "--all",
                    check=False,
                )  # fmt: skip
                if answer.returncode == 0:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"CRDs of {path} not Established on {self.name}: {answer.stderr}"
                )
            time.sleep(1)

    @property
    def node_layout(self) -> NodeLayout:
        """Addresses and paths of this cluster's real node. Network namespaces, addresses
        and /run are machine-wide: a cluster under another cache directory (MGJ_CACHE_DIR)
        gets a node of its own even under the same name."""
        node_id = self.name
        if cache_dir() != default_cache_dir():
            node_id += "-" + hashlib.sha256(str(cache_dir()).encode()).hexdigest()[:6]
        return NodeLayout(node_id, self.workdir.parent / "realnode" / self.name)

    @property
    def registry(self) -> Registry:
        return Registry(self.tools.registry_bin / "registry")

    @property
    def real_node(self) -> RealNode:
        from cluster.realnode import RealNode

        return RealNode(self)

    def is_api_up(self) -> bool:
        """Whether the API server answers /readyz (the rest may still be down)."""
        if not self.kubeconfig.exists():
            return False
        probe = subprocess.run(
            [
                str(self.tools.kubectl),
                "--kubeconfig",
                str(self.kubeconfig),
                "--request-timeout=3s",
                "get",
                "--raw",
                "/readyz",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        return probe.returncode == 0 and probe.stdout.strip() == "ok"

    def is_healthy(self) -> bool:
        if not self.is_api_up():
            return False
        # /readyz covers the API server and etcd only; the rest must be alive too, and
        # started from this version of the configuration.
        running = " ".join(self.running_processes())
        return (
            all(f"/{c} " in running for c in CONTROL_PLANE_COMPONENTS)
            and self._fingerprint_file.exists()
            and self._fingerprint_file.read_text() == self._fingerprint()
        )

    @property
    def _fingerprint_file(self) -> Path:
        return self.kubeconfig.parent / "multigpu-operator-config.sha256"

    def _fingerprint(self) -> str:
        text = json.dumps(self._config_documents(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def up(
        self,
        gpu_nodes: int = 4,
        gpus_per_node: int = 8,
        cpu_nodes: int = 1,
        real_node: bool = True,
        pull_images: bool = True,
    ) -> None:
        """Start the cluster (or reuse a healthy one) and make sure its nodes exist."""
        if not self.is_healthy():
            # A stale cluster (processes killed, machine rebooted, an older configuration)
            # is removed first, real node included.
            if self.is_api_up():
                self.real_node.down()
            self.kwokctl("delete", "cluster", check=False)
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as cfg:
                yaml.safe_dump_all(self._config_documents(), cfg)
            try:
                with self._creating_alone():
                    created = self.kwokctl(
                        "create", "cluster", "--config", cfg.name, "--wait", "120s", check=False
                    )
            finally:
                os.unlink(cfg.name)
            if created.returncode != 0:
                raise RuntimeError(
                    f"kwokctl create cluster failed:\n{created.stdout}\n{created.stderr}"
                )
            self._fingerprint_file.write_text(self._fingerprint())
        self._ensure_nodes(gpu_nodes, gpus_per_node, cpu_nodes)
        if real_node:
            from cluster.images import pull_built

            self.registry.up()
            with ticking("real node: starting containerd, CoreDNS, kube-proxy, kubelet"):
                self.real_node.up()
            if pull_images:
                pull_built(self.real_node, self.registry)

    @contextlib.contextmanager
    def _creating_alone(self) -> Iterator[None]:
        """One `kwokctl create cluster` at a time on this machine: each takes the first
        free ports counting down from 32767, so two at once (the test workers' clusters)
        pick the same ones. Once created, its components hold their ports."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "create.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def down(self) -> None:
        """Stop every process of the cluster and its real node, and remove their state."""
        from cluster import hostproc

        # Kueue (tests/cluster/kueue.py) runs beside the cluster it serves, marked so.
        hostproc.stop(hostproc.marked_processes("MGJ_KUEUE", str(self.kubeconfig.parent / "kueue")))
        # So does the Prometheus Operator (tests/cluster/prometheus.py).
        hostproc.stop(
            hostproc.marked_processes(
                "MGJ_PROMETHEUS_OPERATOR", str(self.kubeconfig.parent / "prometheus")
            )
        )
        self.real_node.down()
        self.kwokctl("delete", "cluster", check=False)
        # kwokctl signals its components but does not wait for them: etcd on a busy
        # machine can still be flushing when it returns.
        hostproc.stop(hostproc.pids_containing(self._process_marker()))
        leftovers = self.running_processes() + self.real_node.running()
        if leftovers:
            raise RuntimeError(f"still running after delete: {leftovers}")
        self.registry.release()  # unless another cluster still pulls from it

    def running_processes(self) -> list[str]:
        """Command lines of live processes that belong to this cluster."""
        from cluster import hostproc

        return hostproc.cmdlines_containing(self._process_marker())

    def _process_marker(self) -> str:
        # The trailing slash keeps "mgj" from matching "mgj-test".
        return f"{self.workdir / 'clusters' / self.name}/"

    def _config_documents(self) -> list[dict[str, Any]]:
        return kwokctl_documents(self.tools, self.node_layout.host_ip)

    def _ensure_nodes(self, gpu_nodes: int, gpus_per_node: int, cpu_nodes: int) -> None:
        existing = set(self.kubectl("get", "nodes", "-o", "name").stdout.split())
        wanted = [gpu_node(f"gpu-node-{i}", gpus_per_node) for i in range(gpu_nodes)]
        wanted += [cpu_node(f"cpu-node-{i}") for i in range(cpu_nodes)]
        missing = [n for n in wanted if f"node/{n['metadata']['name']}" not in existing]
        if missing:
            # `create`, not apply: a Node's status is only taken on create.
            self.kubectl(
                "create",
                "-f",
                "-",
                stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": missing}),
            )
        self.wait_nodes_ready([n["metadata"]["name"] for n in wanted])

    def wait_nodes_ready(self, names: list[str], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            out = self.kubectl("get", "nodes", "-o", "json").stdout
            ready = {
                n["metadata"]["name"]
                for n in json.loads(out)["items"]
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n.get("status", {}).get("conditions", [])
                )
            }
            if set(names) <= ready:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"nodes not Ready after {timeout}s: {sorted(set(names) - ready)}"
                )
            time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--name", default=DEFAULT_NAME, help=f"cluster name (tests use {TEST_NAME})"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the cluster (or reuse a running one)")
    up.add_argument("--gpu-nodes", type=int, default=4)
    up.add_argument("--gpus-per-node", type=int, default=8)
    up.add_argument("--cpu-nodes", type=int, default=1)
    up.add_argument(
        "--no-real-node", action="store_true", help="simulated nodes only (no containerd, kubelet)"
    )
    down = sub.add_parser("down", help="stop the cluster and leave nothing running")
    down.add_argument(
        "--all",
        action="store_true",
        help=f"also stop {TEST_NAME}, {SIMULATED_NAME} and {MANAGER_NAME}, the tests'",
    )
    sub.add_parser("kubeconfig", help="print the kubeconfig path")
    sub.add_parser("tools", help="build the binaries and print their directories")
    args = parser.parse_args(argv)

    tools = build_tools()
    cluster = LocalCluster(tools, args.name)
    if args.command == "up":
        start = time.monotonic()
        cluster.up(args.gpu_nodes, args.gpus_per_node, args.cpu_nodes, not args.no_real_node)
        print(f"cluster {cluster.name} ready in {time.monotonic() - start:.1f}s", file=sys.stderr)
        print(cluster.kubeconfig)
    elif args.command == "down":
        everything = [args.name, TEST_NAME, SIMULATED_NAME, MANAGER_NAME]
        names = dict.fromkeys(everything if args.all else [args.name])
        for name in names:
            LocalCluster(tools, name).down()
            print(f"cluster {name} stopped", file=sys.stderr)
    elif args.command == "kubeconfig":
        print(cluster.kubeconfig)
    else:
        for entry in tools.path_entries:
            print(entry)
    return 0


if __name__ == "__main__":
    sys.exit(main())

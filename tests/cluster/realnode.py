"""A real Kubernetes node on this machine, joined to a local cluster beside its kwok nodes.

containerd (runc, cgroupfs), the CNI bridge, CoreDNS, kube-proxy (nftables) and a kubelet
built from the pinned Kubernetes module run in a network namespace of their own
(realnode_config.py has the layout and why). Pods really start there: containerd pulls
their images from the machine's registry (registry.py) through a forwarder, they resolve
each other through the job's headless Service, and reach the API server through the
`kubernetes` Service. Only the pod sandbox's pause image is imported, not pulled: containerd
needs it before any pod, and a node then starts whether or not `make images` has run.

`up` reuses whatever is already running; `down` stops every process, unmounts everything,
removes the namespace (and with it the bridge, routes and nftables rules) and the cgroups,
and changes no sysctl of the machine: the kubelet's own demands (vm.overcommit_memory,
kernel.panic, kernel.panic_on_oops) are met inside a mount namespace of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import urlparse

import yaml

from cluster import hostproc
from cluster.progress import bytes_under, size, ticking
from cluster.realnode_config import (
    ENV_MARKER,
    NODE_KIND,
    NODE_KIND_LABEL,
    NODE_NAME,
    PAUSE_IMAGE,
    PUBLISHED_REGISTRY,
    REGISTRY_HOST,
    REGISTRY_PORT,
    cni_config,
    containerd_config,
    corefile,
    kube_proxy_config,
    kubeconfig,
    kubelet_config,
    kubernetes_endpoint_slice,
    published_registry_hosts,
    registry_hosts,
)

if TYPE_CHECKING:
    from cluster.localcluster import LocalCluster

# The kubelet sets these unless they already read so; inside its mount namespace they do.
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": "1",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
}
DAEMONS = ("forwarder", "registry-forwarder", "containerd", "coredns", "kube-proxy", "kubelet")
CTR = "ctr"


class RealNode:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.layout = cluster.node_layout

    # Public -------------------------------------------------------------------------

    def up(self, timeout: float = 120) -> None:
        """Start what is not running and wait until the node is Ready."""
        node = self.layout
        for path in (node.run, node.etc, node.logs, node.kubelet_root, node.pod_logs):
            path.mkdir(parents=True, exist_ok=True)
        if self._stale():
            self.down()
            for path in (node.run, node.etc, node.logs, node.kubelet_root, node.pod_logs):
                path.mkdir(parents=True, exist_ok=True)
        self._network()
        self._write_configs()
        self._start("forwarder", self._forwarder_argv())
        self._start("registry-forwarder", self._registry_forwarder_argv())
        self._start(
            "containerd",
            self._in_netns("containerd", "--config", str(self._conf("containerd.toml"))),
        )
        self._wait(lambda: node.containerd_socket.exists(), "containerd's socket", 30)
        self._ensure_pause_image()
        self._start(
            "coredns",
            self._in_netns(str(self._bin("coredns")), "-conf", str(self._conf("Corefile"))),
        )
        self._start(
            "kube-proxy",
            self._in_netns(
                str(self._bin("kube-proxy")), "--config", str(self._conf("kube-proxy.yaml"))
            ),
        )
        hostproc.make_cgroup(node.cgroup_root)
        self._start("kubelet", self._kubelet_argv())
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(kubernetes_endpoint_slice(node)))
        self._wait(self._ready, f"node {NODE_NAME} Ready", timeout)
        (node.run / "cluster-ca.crt").write_bytes(self._pki("ca.crt").read_bytes())

    def down(self) -> None:
        """Leave nothing of the node behind; safe to call at any point, even twice."""
        node = self.layout
        if self.cluster.is_api_up():
            self._drain()
        pids = hostproc.marked_processes(ENV_MARKER, node.cluster)
        hostproc.stop(p for p in pids if self._daemon_of(p) in ("kubelet", "kube-proxy", "coredns"))
        self._delete_containers()
        hostproc.stop(hostproc.marked_processes(ENV_MARKER, node.cluster))
        hostproc.kill(hostproc.cgroup_pids(node.cgroup_root))
        hostproc.unmount_all(node.run, node.kubelet_root, node.containerd_root)
        hostproc.remove_cgroup(node.cgroup_root)
        subprocess.run(["ip", "netns", "delete", node.netns], capture_output=True, check=False)
        subprocess.run(["ip", "link", "delete", node.host_veth], capture_output=True, check=False)
        shutil.rmtree(node.run, ignore_errors=True)
        # The kubelet's and the pods' state goes; containerd's image store stays (a cache).
        for path in (node.kubelet_root, node.pod_logs, node.etc):
            shutil.rmtree(path, ignore_errors=True)
        if self.cluster.is_api_up():
            self.cluster.kubectl("delete", "node", NODE_NAME, "--ignore-not-found", check=False)

    def running(self) -> list[str]:
        """What of the node is still on this machine (empty once `down` finished)."""
        node = self.layout
        left = [f"process {p}" for p in hostproc.marked_processes(ENV_MARKER, node.cluster)]
        left += [
            f"mount {m}"
            for m in hostproc.mounts_under(node.run, node.kubelet_root, node.containerd_root)
        ]
        left += [f"cgroup pid {p}" for p in hostproc.cgroup_pids(node.cgroup_root)]
        if Path(f"/run/netns/{node.netns}").exists():
            left.append(f"netns {node.netns}")
        if Path(f"/sys/class/net/{node.host_veth}").exists():
            left.append(f"link {node.host_veth}")
        return left

    def ctr(
        self, *args: str, stdin_file: IO[bytes] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """containerd's own client, in the namespace the kubelet's images live in."""
        argv = [
            CTR,
            "--address",
            str(self.layout.containerd_socket),
            "--namespace",
            "k8s.io",
            *args,
        ]
        proc = subprocess.run(argv, stdin=stdin_file, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
        return proc

    def pull(self, ref: str, total: int) -> None:
        """containerd pulls `ref` (of `total` bytes) from the registry through the hosts.toml
        the kubelet's pulls use, showing how far it is; quick when it has the image."""
        content = self.layout.containerd_root / "io.containerd.content.v1.content"
        before = bytes_under(content)

        def status() -> str:
            fetched = bytes_under(content) - before
            done = "unpacking" if fetched >= total else "pulling"
            return f"{done}, {size(fetched)} fetched of {size(total)}"

        # Inside the node's namespace, where localhost:5001 is nothing: only the hosts.toml
        # leads to the registry, as for the kubelet's pulls.
        argv = self._in_netns(
            CTR, "--address", str(self.layout.containerd_socket), "--namespace", "k8s.io",
            "images", "pull", "--hosts-dir", str(self.layout.registry_hosts_dir), ref,
        )  # fmt: skip
        with ticking(f"real node: {ref}", status):
            _run(*argv)

    def image_labels(self) -> dict[str, dict[str, str]]:
        """Images in the node's containerd, by name, with their containerd labels."""
        out = self.ctr("images", "list").stdout.splitlines()[1:]
        images = {}
        for line in out:
            fields = line.split()
            labels = dict(kv.split("=", 1) for kv in fields[-1].split(",") if "=" in kv)
            images[fields[0]] = labels
        return images

    # Steps ----------------------------------------------------------------------------

    def _stale(self) -> bool:
        """A node started against an earlier incarnation of the cluster (another CA), or
        with another containerd configuration, which containerd reads only when it starts
        (a node started by an earlier version of this code)."""
        marker = self.layout.run / "cluster-ca.crt"
        if marker.exists() and marker.read_bytes() != self._pki("ca.crt").read_bytes():
            return True
        conf = self._conf("containerd.toml")
        return conf.exists() and conf.read_text() != containerd_config(self.layout)

    def _network(self) -> None:
        node = self.layout
        owned = Path(f"/run/netns/{node.netns}").exists()
        if Path(f"/sys/class/net/{node.host_veth}").exists() and not owned:
            raise RuntimeError(
                f"{node.host_veth} ({node.host_ip}) belongs to another cluster's real node: "
                "cluster names map to the same addresses; choose another --name"
            )
        if not owned:
            _run("ip", "netns", "add", node.netns)
        if not Path(f"/sys/class/net/{node.host_veth}").exists():
            _run(
                "ip", "link", "add", node.host_veth, "type", "veth", "peer", "name", node.node_veth
            )
            _run("ip", "link", "set", node.node_veth, "netns", node.netns)
            _run("ip", "addr", "add", f"{node.host_ip}/30", "dev", node.host_veth)
            _run("ip", "link", "set", node.host_veth, "up")
            ns = ("ip", "-n", node.netns)
            _run(*ns, "link", "set", node.node_veth, "name", "eth0")
            _run(*ns, "addr", "add", f"{node.node_ip}/30", "dev", "eth0")
            _run(*ns, "link", "set", "eth0", "up")
            _run(*ns, "link", "set", "lo", "up")
            _run(*ns, "route", "add", "default", "via", node.host_ip)
            # The machine reaches pod IPs (tests read /metrics from them) through the node.
            _run("ip", "route", "replace", node.pod_cidr, "via", node.node_ip)
        # The bridge exists before the first pod so that CoreDNS can bind its address; the
        # CNI plugin adopts it. Forwarding is a per-namespace setting: the node's, not ours.
        if not _netns_has_link(node.netns, node.bridge):
            ns = ("ip", "-n", node.netns)
            _run(*ns, "link", "add", node.bridge, "type", "bridge")
            _run(*ns, "addr", "add", f"{node.bridge_ip}/24", "dev", node.bridge)
            _run(*ns, "link", "set", node.bridge, "up")
        _run("ip", "netns", "exec", node.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def _write_configs(self) -> None:
        node = self.layout
        kcfg = self._conf("kubeconfig.yaml")
        pki = (self._pki("ca.crt"), self._pki("admin.crt"), self._pki("admin.key"))
        files = {
            "containerd.toml": containerd_config(node),
            "kubeconfig.yaml": kubeconfig(node, *pki),
            "kubelet.yaml": kubelet_config(node),
            "kube-proxy.yaml": kube_proxy_config(node, kcfg),
            "Corefile": corefile(node, kcfg),
        }
        for name, text in files.items():
            _write(self._conf(name), text)
        for host, text in (
            (REGISTRY_HOST, registry_hosts(node)),
            (PUBLISHED_REGISTRY, published_registry_hosts(node)),
        ):
            (node.registry_hosts_dir / host).mkdir(parents=True, exist_ok=True)
            _write(node.registry_hosts_dir / host / "hosts.toml", text)
        node.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        _write(node.cni_conf_dir / "10-mgj.conflist", cni_config(node))
        node.sysctl_dir.mkdir(parents=True, exist_ok=True)
        for key, value in KUBELET_SYSCTLS.items():
            _write(node.sysctl_dir / key.replace("/", "."), value + "\n")

    def _forwarder_argv(self) -> list[str]:
        port = urlparse(self._server()).port
        return [
            "socat",
            f"TCP-LISTEN:{6443},bind={self.layout.host_ip},reuseaddr,fork",
            f"TCP:127.0.0.1:{port}",
        ]

    def _registry_forwarder_argv(self) -> list[str]:
        """The registry listens on 127.0.0.1 only, like the API server."""
        return [
            "socat",
            f"TCP-LISTEN:{REGISTRY_PORT},bind={self.layout.host_ip},reuseaddr,fork",
            f"TCP:127.0.0.1:{REGISTRY_PORT}",
        ]

    def _kubelet_argv(self) -> list[str]:
        node = self.layout
        # The kubelet's root is a shared mount, so the volumes it mounts inside its own
        # mount namespace (tokens, configMaps, emptyDirs) are seen by containerd.
        root = str(node.kubelet_root)
        if root not in hostproc.mounts_under(node.kubelet_root):
            _run("mount", "--bind", root, root)
            _run("mount", "--make-rshared", root)
        binds = "; ".join(
            f"mount --bind {node.sysctl_dir / k.replace('/', '.')} /proc/sys/{k}"
            for k in KUBELET_SYSCTLS
        )
        kubelet = [
            str(self._bin("kubelet")),
            "--config", str(self._conf("kubelet.yaml")),
            "--kubeconfig", str(self._conf("kubeconfig.yaml")),
            "--root-dir", root,
            "--hostname-override", NODE_NAME,
            "--node-ip", node.node_ip,
            "--node-labels", f"{NODE_KIND_LABEL}={NODE_KIND}",
            "--v=1",
        ]  # fmt: skip
        return self._in_netns(
            "unshare", "-m", "--propagation", "unchanged",
            "sh", "-c", f'{binds}; exec "$@"', "kubelet", *kubelet,
        )  # fmt: skip

    def _ensure_pause_image(self) -> None:
        if PAUSE_IMAGE in self.image_labels():
            return
        from cluster.images import pause_image_archive  # built on demand: one static binary

        self.ctr("images", "import", str(pause_image_archive()))

    def _ready(self) -> bool:
        out = self.cluster.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        if out.returncode != 0:
            return False
        conditions = json.loads(out.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _drain(self) -> None:
        """Delete the node's pods through the API, so the kubelet tears them down (their
        containers, network namespaces and addresses) the way it normally does."""
        if not any(hostproc.marked_processes(ENV_MARKER, self.layout.cluster)) or not self._ready():
            return
        self.cluster.kubectl(
            "delete", "pods", "--all-namespaces", "--field-selector",
            f"spec.nodeName={NODE_NAME}", "--grace-period=1", "--wait=false", check=False,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out = self.cluster.kubectl(
                "get", "pods", "-A", "--field-selector", f"spec.nodeName={NODE_NAME}", "-o", "name",
                check=False,
            )  # fmt: skip
            if out.returncode != 0 or not out.stdout.strip():
                return
            time.sleep(0.5)

    def _delete_containers(self) -> None:
        """Whatever the kubelet left: kill and delete every task and container."""
        if not self.layout.containerd_socket.exists():
            return
        try:
            tasks = self.ctr("tasks", "list", "--quiet").stdout.split()
            for task in tasks:
                subprocess.run(
                    [CTR, "--address", str(self.layout.containerd_socket), "-n", "k8s.io",
                     "tasks", "delete", "--force", task],
                    capture_output=True, check=False, timeout=30,
                )  # fmt: skip
            for container in self.ctr("containers", "list", "--quiet").stdout.split():
                subprocess.run(
                    [CTR, "--address", str(self.layout.containerd_socket), "-n", "k8s.io",
                     "containers", "delete", container],
                    capture_output=True, check=False, timeout=30,
                )  # fmt: skip
        except (RuntimeError, subprocess.TimeoutExpired):
            pass  # containerd is not answering: its processes are killed next

    # Helpers --------------------------------------------------------------------------

    def _start(self, name: str, argv: list[str]) -> None:
        pidfile = self.layout.run / f"{name}.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text())
            if pid in hostproc.marked_processes(ENV_MARKER, self.layout.cluster):
                return
        env = {**os.environ, ENV_MARKER: self.layout.cluster}
        env.pop("KUBECONFIG", None)
        pid = hostproc.start_daemon(name, argv, self.layout.logs, env)
        pidfile.write_text(str(pid))

    def _daemon_of(self, pid: int) -> str | None:
        for name in DAEMONS:
            pidfile = self.layout.run / f"{name}.pid"
            if pidfile.exists() and pidfile.read_text().strip() == str(pid):
                return name
        return None

    def _in_netns(self, *argv: str) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.layout.netns}", "--", *argv]

    def _conf(self, name: str) -> Path:
        return self.layout.etc / name

    def _pki(self, name: str) -> Path:
        return self.cluster.kubeconfig.parent / "pki" / name

    def _bin(self, name: str) -> Path:
        tools = self.cluster.tools
        return (tools.coredns_bin if name == "coredns" else tools.node_bin) / name

    def _server(self) -> str:
        config = yaml.safe_load(self.cluster.kubeconfig.read_text())
        return str(config["clusters"][0]["cluster"]["server"])

    def _wait(self, probe: object, what: str, timeout: float) -> None:
        assert callable(probe)
        deadline = time.monotonic() + timeout
        while not probe():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not after {timeout:.0f}s; logs in {self.layout.logs}")
            time.sleep(0.3)


def _write(path: Path, text: str) -> None:
    """Write `path` unless it already holds `text`: kube-proxy exits when its
    configuration file is written, even with the same content."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")


def _netns_has_link(netns: str, link: str) -> bool:
    proc = subprocess.run(
        ["ip", "-n", netns, "link", "show", link], capture_output=True, check=False
    )
    return proc.returncode == 0

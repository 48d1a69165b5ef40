"""Where a real node lives and how its parts are configured (pure: no I/O).

A real node is a network namespace of its own on this machine, the way a kind node is a
container: containerd, the kubelet, kube-proxy and CoreDNS run inside it, pods hang off a
bridge inside it, and deleting the namespace takes every address, route, bridge and
nftables rule with it. One veth pair joins it to the machine; a forwarder on the machine's
end of that pair carries the node's (and the pods') API traffic to the API server, which
listens on 127.0.0.1 only.

Every cluster gets its own addresses and directories (derived from its name), so the demo
cluster and the tests' cluster can both have a real node at the same time.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

NODE_NAME = "real-node"
NODE_KIND_LABEL = "multigpu.dev/node-kind"
NODE_KIND = "real"
# Pods opt in to the real node: simulated CPU-only test pods must never land on it.
NODE_TAINT = {"key": NODE_KIND_LABEL, "value": NODE_KIND, "effect": "NoSchedule"}
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
FORWARD_PORT = 6443
# The machine's registry (registry.py) as pods name it; from inside the node's namespace it
# is a forwarder on the machine's end of the veth (containerd's hosts.toml says so).
REGISTRY_HOST = "localhost:5001"
# Where the chart and the examples say the images are: the node looks for them in the local
# registry first (a mirror), so a job applied as written (make demo) pulls what was built.
PUBLISHED_REGISTRY = "ghcr.io"
REGISTRY_PORT = 5001
PAUSE_IMAGE = "localhost/multigpu-operator/pause:3.10.2"
CNI_BIN_DIR = "/usr/lib/cni"
RUNC = "/usr/sbin/runc"
# Marks every process of a node (inherited by containerd's shims), so that `down` finds
# them all, whatever their command line.
ENV_MARKER = "MGJ_REAL_NODE"


def node_index(cluster: str) -> int:
    """A stable number in 16..215 for the cluster: the third octet of its addresses."""
    return 16 + zlib.crc32(cluster.encode()) % 200


@dataclass(frozen=True)
class NodeLayout:
    """Names, addresses and paths of one cluster's real node."""

    cluster: str
    cache: Path  # per-cluster directory under the cache (configs, logs, state that may stay)

    @property
    def index(self) -> int:
        return node_index(self.cluster)

    # Network ------------------------------------------------------------------------

    @property
    def netns(self) -> str:
        return f"mgj-{self.cluster}"

    @property
    def host_veth(self) -> str:
        return f"mgjh{self.index}"  # interface names have at most 15 characters

    @property
    def node_veth(self) -> str:
        return f"mgjn{self.index}"  # renamed eth0 inside the namespace

    @property
    def host_ip(self) -> str:
        """The machine's end of the veth pair: the forwarder to the API server listens here."""
        return f"172.30.{self.index}.1"

    @property
    def node_ip(self) -> str:
        """The node's InternalIP: the API server reaches the kubelet here."""
        return f"172.30.{self.index}.2"

    @property
    def pod_cidr(self) -> str:
        return f"10.244.{self.index}.0/24"

    @property
    def bridge_ip(self) -> str:
        """The pods' gateway, where CoreDNS answers them."""
        return f"10.244.{self.index}.1"

    @property
    def bridge(self) -> str:
        return "cni0"

    @property
    def api_endpoint(self) -> str:
        return f"https://{self.host_ip}:{FORWARD_PORT}"

    @property
    def registry_endpoint(self) -> str:
        return f"http://{self.host_ip}:{REGISTRY_PORT}"

    # Paths --------------------------------------------------------------------------

    @property
    def run(self) -> Path:
        """Sockets, pid files, netns mounts: gone with the machine, removed by `down`."""
        return Path("/run/multigpu-operator") / self.cluster

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def runc_root(self) -> Path:
        return self.run / "runc"

    @property
    def containerd_root(self) -> Path:
        """Images stay here between `up`s (a cache); everything else is removed by `down`."""
        return self.cache / "containerd"

    @property
    def kubelet_root(self) -> Path:
        return self.cache / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.cache / "pod-logs"

    @property
    def etc(self) -> Path:
        return self.cache / "etc"

    @property
    def logs(self) -> Path:
        return self.cache / "logs"

    @property
    def cni_conf_dir(self) -> Path:
        return self.etc / "cni"

    @property
    def registry_hosts_dir(self) -> Path:
        """containerd's config_path: <registry host>/hosts.toml for each registry."""
        return self.etc / "certs.d"

    @property
    def ipam_dir(self) -> Path:
        return self.run / "ipam"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's cgroupRoot: every pod's cgroups nest under it, in every hierarchy."""
        return f"/multigpu-operator-{self.cluster}"

    @property
    def sysctl_dir(self) -> Path:
        return self.run / "sysctl"


def containerd_config(node: NodeLayout) -> str:
    """containerd 1.6 (Debian's): CRI with runc on cgroupfs, images from the registries
    that registry_hosts_dir names (the machine's only)."""
    return f"""\
version = 2
root = "{node.containerd_root}"
state = "{node.containerd_state}"
[grpc]
  address = "{node.containerd_socket}"
[ttrpc]
  address = "{node.containerd_socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # No AppArmor on this machine; lowering oom_score_adj needs CAP_SYS_RESOURCE.
  disable_apparmor = true
  restrict_oom_score_adj = true
  # Pod network namespaces under our state directory, not /run/netns: `down` finds them.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{RUNC}"
        Root = "{node.runc_root}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{node.cni_conf_dir}"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{node.registry_hosts_dir}"
"""


def registry_hosts(node: NodeLayout) -> str:
    """hosts.toml of REGISTRY_HOST: plain HTTP to the forwarder that reaches the registry
    (localhost inside the node's namespace is the node's own loopback). containerd 1.6
    refuses a file without a [host] table ("invalid `host` tree"), even beside `server`."""
    return f"""\
server = "{node.registry_endpoint}"

[host."{node.registry_endpoint}"]
  capabilities = ["pull", "resolve"]
"""


def published_registry_hosts(node: NodeLayout) -> str:
    """hosts.toml of PUBLISHED_REGISTRY: the local registry as its mirror (containerd tries
    a [host] before `server`), which holds the images under the same paths."""
    return f"""\
server = "https://{PUBLISHED_REGISTRY}"

[host."{node.registry_endpoint}"]
  capabilities = ["pull", "resolve"]
"""


def cni_config(node: NodeLayout) -> str:
    """The CNI bridge plugin with host-local addresses; runs inside the node's namespace."""
    conf: dict[str, Any] = {
        "cniVersion": "1.0.0",
        "name": f"mgj-{node.cluster}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(node.ipam_dir),
                    "ranges": [[{"subnet": node.pod_cidr, "gateway": node.bridge_ip}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


def kubeconfig(node: NodeLayout, ca: Path, cert: Path, key: Path) -> str:
    """Admin credentials of the cluster, for the node's components, through the forwarder."""
    conf = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": node.cluster,
                "cluster": {"server": node.api_endpoint, "certificate-authority": str(ca)},
            }
        ],
        "users": [
            {"name": "admin", "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "node", "context": {"cluster": node.cluster, "user": "admin"}}],
        "current-context": "node",
    }
    return yaml.safe_dump(conf, sort_keys=False)


def kubelet_config(node: NodeLayout) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        # This machine has the v1 controllers (hybrid mode); kubelet >= 1.35 refuses them
        # unless told otherwise, and warns.
        "failCgroupV1": False,
        "failSwapOn": False,
        "cgroupsPerQOS": True,
        "cgroupRoot": node.cgroup_root,
        "enforceNodeAllocatable": ["pods"],
        "address": node.node_ip,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        # The API server calls the kubelet (logs, exec) without a client certificate.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [node.bridge_ip],
        "resolvConf": "/etc/resolv.conf",
        "podLogsDir": str(node.pod_logs),
        "registerWithTaints": [NODE_TAINT],
        "serializeImagePulls": False,
        # Images pulled once stay (a second `make demo` starts its jobs at once): never
        # garbage-collect them, and never evict pods for a disk that other work on this
        # machine fills.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "maxPods": 110,
        "protectKernelDefaults": False,
        "makeIPTablesUtilChains": False,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(node: NodeLayout, kubeconfig_path: Path) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "hostnameOverride": NODE_NAME,
        "clientConnection": {"kubeconfig": str(kubeconfig_path)},
        "clusterCIDR": node.pod_cidr,
        # A pod reaching a Service backed by a pod on the same bridge gets its answer through
        # the node (no br_netfilter here), so every Service connection is masqueraded.
        "nftables": {"masqueradeAll": True},
        # Leave the machine's conntrack settings alone (0 = do not change).
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "oomScoreAdj": 0,
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
    }
    return yaml.safe_dump(config, sort_keys=False)


def corefile(node: NodeLayout, kubeconfig_path: Path) -> str:
    """Cluster DNS for the pods: <pod>.<service>.<namespace>.svc.cluster.local and Services.
    Nothing is forwarded: pods have no way off this machine anyway."""
    return f"""\
.:53 {{
    bind {node.bridge_ip}
    errors
    ready 127.0.0.1:8181
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig_path}
        pods insecure
        ttl 5
    }}
    cache 5
}}
"""


def kubernetes_endpoint_slice(node: NodeLayout) -> dict[str, Any]:
    """The `kubernetes` Service's endpoint: the forwarder on the machine's end of the veth.
    The API server (started with --endpoint-reconciler-type=none) publishes none."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes-real-node",
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": "kubernetes",
                "endpointslice.kubernetes.io/managed-by": "real-node.multigpu.dev",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node.host_ip], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": FORWARD_PORT, "protocol": "TCP"}],
    }

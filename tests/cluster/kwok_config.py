"""What `kwokctl create cluster` is given for a local test cluster (localcluster.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cluster.realnode_config import KUBERNETES_SERVICE_IP, SERVICE_CIDR
from cluster.tools import Tools

STAGES_FILE = Path(__file__).resolve().parent / "stages.yaml"


def kwokctl_documents(tools: Tools, node_host_ip: str) -> list[dict[str, Any]]:
    """kwokctl's configuration of a test cluster and the Stages of its simulated pods: the
    control plane from our binaries, bound to 127.0.0.1, reachable from the real node
    (whose end of the veth is `node_host_ip`)."""
    k8s = tools.k8s_bin
    options = {
        "runtime": "binary",
        "bindAddress": "127.0.0.1",
        "kubeVersion": tools.k8s_version,
        "kubeApiserverBinary": str(k8s / "kube-apiserver"),
        "kubeControllerManagerBinary": str(k8s / "kube-controller-manager"),
        "kubeSchedulerBinary": str(k8s / "kube-scheduler"),
        "kubectlBinary": str(k8s / "kubectl"),
        "etcdBinary": str(tools.etcd_bin / "etcd"),
        "kwokControllerBinary": str(tools.kwok_bin / "kwok"),
        "kubeAuthorization": True,
        "nodeLeaseDurationSeconds": 40,
        # Benchmarks measure the operator, not the simulator's rate limits.
        "disableQPSLimits": True,
        # Pods of the real node reach the API server as the `kubernetes` Service, its
        # components through the forwarder on the machine's end of the node's veth.
        "kubeApiserverCertSANs": [KUBERNETES_SERVICE_IP, node_host_ip],
    }
    config: dict[str, Any] = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": options,
        "componentsPatches": [
            {
                "name": "kube-apiserver",
                "extraArgs": [
                    {"key": "advertise-address", "value": "127.0.0.1"},
                    {"key": "endpoint-reconciler-type", "value": "none"},
                    {"key": "service-cluster-ip-range", "value": SERVICE_CIDR},
                    # logs, exec and port-forward reach the real kubelet at its
                    # InternalIP; no name of the node resolves on this machine.
                    {"key": "kubelet-preferred-address-types", "value": "InternalIP"},
                ],
            },
            # kwok fakes the status of the nodes it manages: only the simulated ones.
            {
                "name": "kwok-controller",
                "extraArgs": [
                    {"key": "manage-all-nodes", "value": "false"},
                    {
                        "key": "manage-nodes-with-annotation-selector",
                        "value": "kwok.x-k8s.io/node=fake",
                    },
                ],
            },
            # One instance each: leader election only adds a way to die. Under benchmark
            # load a missed lease renewal made them exit, leaving a cluster whose API
            # answered but which no longer scheduled pods or created ServiceAccounts.
            *(
                {"name": name, "extraArgs": [{"key": "leader-elect", "value": "false"}]}
                for name in ("kube-controller-manager", "kube-scheduler")
            ),
        ],
    }
    stages = list(yaml.safe_load_all(STAGES_FILE.read_text()))
    return [config, *stages]

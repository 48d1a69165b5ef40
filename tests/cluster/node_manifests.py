"""Node objects for the local cluster's simulated nodes (kwok runs them): GPU nodes like
GPU-operator-managed ones, and plain CPU nodes."""

from __future__ import annotations

from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"


def _node(name: str, labels: dict[str, str], resources: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            # kwok manages only nodes that carry this annotation.
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "type": "kwok",
                **labels,
            },
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def gpu_node(name: str, gpus: int) -> dict[str, Any]:
    """A node like a GPU-operator-managed one: GPU labels, resource and taint."""
    node = _node(
        name,
        {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.product": GPU_PRODUCT,
            "nvidia.com/gpu.memory": "81559",
        },
        {"cpu": "96", "memory": "1Ti", "pods": "110", GPU_RESOURCE: str(gpus)},
    )
    node["spec"] = {"taints": [{"key": GPU_RESOURCE, "effect": "NoSchedule"}]}
    return node


def cpu_node(name: str) -> dict[str, Any]:
    """An untainted node without GPUs, for CPU-only pods."""
    return _node(name, {}, {"cpu": "32", "memory": "128Gi", "pods": "110"})

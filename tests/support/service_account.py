"""Acting as a ServiceAccount: a kubeconfig holding only that account's token."""

from __future__ import annotations

from pathlib import Path

import yaml

from cluster.localcluster import LocalCluster


def service_account_kubeconfig(
    cluster: LocalCluster, namespace: str, name: str, path: Path
) -> Path:
    """A kubeconfig that authenticates with the ServiceAccount's own token only, so every
    request is authorized by that account's RBAC (as in-cluster)."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    token = cluster.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout
    cluster_name = admin["clusters"][0]["name"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": name, "user": {"token": token.strip()}}],
                "contexts": [{"name": name, "context": {"cluster": cluster_name, "user": name}}],
                "current-context": name,
            }
        )
    )
    return path

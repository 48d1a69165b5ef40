"""The operator's API layer (cluster/api.py) against the real API server."""

from __future__ import annotations

import asyncio

import kopf
import pytest
from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.cluster.api import Kube, connect
from multigpu_operator.cluster.kinds import PODS
from support.waiting import wait_for

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "same"},
    "spec": {"containers": [{"name": "trainer", "image": "trainer:test"}]},
}


def test_a_delete_meant_for_a_gone_pod_leaves_its_namesake_alone(
    local_cluster: LocalCluster,
    core: client.CoreV1Api,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(local_cluster.kubeconfig))
    old = core.create_namespaced_pod(namespace, POD).metadata.uid
    core.delete_namespaced_pod("same", namespace, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, "old pod gone")
    new = core.create_namespaced_pod(namespace, POD).metadata.uid

    async def delete(uid: str) -> None:
        api = await connect(lambda: kopf.login_with_kubeconfig(settings=kopf.OperatorSettings()))
        try:
            await Kube(api).delete(PODS, namespace, "same", uid)
        finally:
            await api.close()

    asyncio.run(delete(old))  # a stale view: the pod it saw is gone
    pod = core.read_namespaced_pod("same", namespace)
    assert (pod.metadata.uid, pod.metadata.deletion_timestamp) == (new, None)

    asyncio.run(delete(new))
    assert core.read_namespaced_pod("same", namespace).metadata.deletion_timestamp is not None
    core.delete_namespaced_pod("same", namespace, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, "new pod gone")
    asyncio.run(delete(new))  # already gone: not an error

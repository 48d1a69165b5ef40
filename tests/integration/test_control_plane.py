"""The local control plane behaves like a real GPU cluster where our tests rely on it.

Every test here runs against the real kube-apiserver, etcd, kube-scheduler and
kube-controller-manager, with kwok simulating the GPU nodes and pod lifecycles.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from cluster.localcluster import LocalCluster
from cluster.node_manifests import GPU_RESOURCE
from support.waiting import wait_for

GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def pod_manifest(
    name: str,
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    security_context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "trainer", "image": "busybox:1.36"}
    if gpus:
        container["resources"] = {"limits": {GPU_RESOURCE: str(gpus)}}
    if security_context is not None:
        container["securityContext"] = security_context
    metadata: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    spec: dict[str, Any] = {
        "containers": [container],
        "tolerations": [GPU_TOLERATION],
        "restartPolicy": "Never",
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def read_pod(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod:
    pod: client.V1Pod = core.read_namespaced_pod(name, namespace)
    return pod


def pod_phase(core: client.CoreV1Api, namespace: str, name: str) -> str:
    return str(read_pod(core, namespace, name).status.phase)


def test_gpu_pod_is_scheduled_to_a_gpu_node_and_runs(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("two-gpus", gpus=2))

    wait_for(lambda: pod_phase(core, namespace, "two-gpus") == "Running", "pod Running")

    pod = read_pod(core, namespace, "two-gpus")
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["nvidia.com/gpu.present"] == "true"
    assert int(node.status.allocatable[GPU_RESOURCE]) >= 2
    assert pod.spec.containers[0].resources.requests == {GPU_RESOURCE: "2"}


def test_pod_asking_more_gpus_than_any_node_stays_unschedulable(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("nine-gpus", gpus=9))

    def unschedulable() -> client.V1PodCondition | None:
        for cond in read_pod(core, namespace, "nine-gpus").status.conditions or []:
            if cond.type == "PodScheduled" and cond.reason == "Unschedulable":
                return cond
        return None

    cond = wait_for(unschedulable, "PodScheduled=False/Unschedulable")
    assert cond.status == "False"
    assert f"Insufficient {GPU_RESOURCE}" in cond.message
    assert pod_phase(core, namespace, "nine-gpus") == "Pending"


def test_pod_without_toleration_does_not_land_on_tainted_gpu_nodes(
    core: client.CoreV1Api, namespace: str
) -> None:
    manifest = pod_manifest("no-toleration", gpus=1)
    manifest["spec"]["tolerations"] = []
    core.create_namespaced_pod(namespace, manifest)

    def reason() -> str | None:
        for cond in read_pod(core, namespace, "no-toleration").status.conditions or []:
            if cond.type == "PodScheduled" and cond.reason == "Unschedulable":
                return str(cond.message)
        return None

    assert "untolerated taint" in wait_for(reason, "Unschedulable for the GPU taint")


@pytest.mark.parametrize(
    ("annotations", "phase", "exit_code", "reason"),
    [
        pytest.param(
            {"sim.multigpu.dev/succeed-after": "1s"}, "Succeeded", 0, "Completed", id="succeed"
        ),
        pytest.param(
            {
                "sim.multigpu.dev/fail-after": "1s",
                "sim.multigpu.dev/exit-code": "137",
                "sim.multigpu.dev/reason": "OOMKilled",
            },
            "Failed",
            137,
            "OOMKilled",
            id="fail-137",
        ),
        pytest.param(
            {"sim.multigpu.dev/fail-after": "0s"}, "Failed", 1, "Error", id="fail-default"
        ),
        pytest.param(
            {"sim.multigpu.dev/fail-at-start": "true"},
            "Failed",
            128,
            "StartError",
            id="fail-at-start",
        ),
    ],
)
def test_annotations_drive_the_pod_lifecycle(
    core: client.CoreV1Api,
    namespace: str,
    annotations: dict[str, str],
    phase: str,
    exit_code: int,
    reason: str,
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("sim", gpus=1, annotations=annotations))

    wait_for(lambda: pod_phase(core, namespace, "sim") == phase, f"pod {phase}")

    terminated = read_pod(core, namespace, "sim").status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (exit_code, reason)


def test_failure_injected_into_a_running_pod(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("victim", gpus=1))
    wait_for(lambda: pod_phase(core, namespace, "victim") == "Running", "pod Running")

    core.patch_namespaced_pod(
        "victim",
        namespace,
        {
            "metadata": {
                "annotations": {
                    "sim.multigpu.dev/fail-after": "0s",
                    "sim.multigpu.dev/exit-code": "137",
                }
            }
        },
    )

    wait_for(lambda: pod_phase(core, namespace, "victim") == "Failed", "pod Failed")
    status = read_pod(core, namespace, "victim").status.container_statuses[0]
    assert status.state.terminated.exit_code == 137


def kwok_pod_deletes(cluster: LocalCluster, pod: str) -> tuple[int, int]:
    """How often kwok deleted the pod `pod` (namespace/name), and how often its delete of
    that name failed (a 404 among them), from kwok's own log: the API server's counters
    are the whole cluster's, which other tests' deletes move."""
    done = failed = 0
    for line in cluster.component_log("kwok-controller").read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("pod") != pod:
            continue
        done += entry.get("msg") == "Delete pod"
        failed += "failed to delete pod" in str(entry.get("err", ""))
    return done, failed


def longest_delete_delay_ms() -> int:
    """The longest fixed delay of kwok's stages that delete a pod (tests/cluster/stages.yaml)."""
    stages = yaml.safe_load_all((Path(__file__).parents[1] / "cluster/stages.yaml").read_text())
    return max(
        int(stage["spec"]["delay"]["durationMilliseconds"])
        for stage in stages
        if stage
        and stage["spec"]["resourceRef"]["kind"] == "Pod"
        and stage["spec"]["next"].get("delete")
        and "durationMilliseconds" in (stage["spec"].get("delay") or {})
    )


def test_a_deleted_pod_is_removed_once_and_its_replacement_survives(
    local_cluster: LocalCluster, core: client.CoreV1Api, namespace: str
) -> None:
    # Controllers (ours included) reuse a pod's name once the old pod is gone; the
    # simulated kubelet must not delete the old pod twice by name and hit the new one.
    core.create_namespaced_pod(namespace, pod_manifest("same"))
    wait_for(lambda: pod_phase(core, namespace, "same") == "Running", "pod Running")

    core.delete_namespaced_pod("same", namespace, grace_period_seconds=1)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, "old pod gone")
    core.create_namespaced_pod(namespace, pod_manifest("same"))
    wait_for(lambda: pod_phase(core, namespace, "same") == "Running", "new pod Running")
    # kwok's stages share one queue ordered by when they are due: a pod that exits after
    # the longest delay of a delete stage, queued after the old pod was gone, exits only
    # after every delete kwok could have queued for the old pod was done.
    later = {"sim.multigpu.dev/succeed-after": f"{longest_delete_delay_ms()}ms"}
    core.create_namespaced_pod(namespace, pod_manifest("later", annotations=later))
    wait_for(lambda: pod_phase(core, namespace, "later") == "Succeeded", "kwok past those")

    assert read_pod(core, namespace, "same").metadata.deletion_timestamp is None
    # Deleted once, the old pod; never again by that name: no 404, no hit on the new one.
    assert kwok_pod_deletes(local_cluster, f"{namespace}/same") == (1, 0)


def test_restricted_pod_security_rejects_a_privileged_pod(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )

    with pytest.raises(ApiException) as rejected:
        core.create_namespaced_pod(
            namespace, pod_manifest("privileged", security_context={"privileged": True})
        )

    assert rejected.value.status == 403
    message = json.loads(rejected.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message
    assert (
        'privileged (container "trainer" must not set securityContext.privileged=true)' in message
    )
    # A pod that meets the profile is admitted, so the rejection was the profile's doing.
    compliant = {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    core.create_namespaced_pod(namespace, pod_manifest("compliant", security_context=compliant))


def test_service_account_without_a_role_is_forbidden(
    local_cluster: LocalCluster, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    )
    token = local_cluster.kubectl("create", "token", "nobody", "-n", namespace).stdout.strip()
    # The token is a real signed service-account token, not an impersonation.
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{namespace}:nobody"

    # A client that carries only the token (the admin kubeconfig's client certificate
    # would otherwise authenticate first).
    admin = core.api_client.configuration
    as_sa = client.Configuration()
    as_sa.host, as_sa.ssl_ca_cert = admin.host, admin.ssl_ca_cert
    as_sa.api_key = {"authorization": f"Bearer {token}"}
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(client.ApiClient(as_sa)).list_namespaced_pod(namespace)

    assert denied.value.status == 403
    message = json.loads(denied.value.body)["message"]
    assert f'User "system:serviceaccount:{namespace}:nobody" cannot list resource "pods"' in message

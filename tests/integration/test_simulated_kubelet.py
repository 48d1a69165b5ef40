"""kwok's simulated kubelet (tests/cluster/stages.yaml) removes every pod that is being
deleted, so that no integration test can wait forever for a pod to go."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from kubernetes import client

from cluster.localcluster import LocalCluster
from support.waiting import wait_for

DELETER = "mgj-test-deleter"


def refuse_removal_by(cluster: LocalCluster, namespace: str, user: str) -> Iterator[None]:
    """While active: the API server refuses `user`'s deletes of pods in `namespace` at
    their second step. A delete first writes the grace period (0 for a finished pod),
    then removes the pod; when the removal fails (here by policy; in the wild, etcd
    timing out on a busy machine) the pod is left terminating with grace period 0."""
    name = f"mgj-test-refuse-removal-{namespace}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["DELETE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": (
                        f"request.userInfo.username != '{user}'"
                        " || !has(oldObject.metadata.deletionGracePeriodSeconds)"
                        " || oldObject.metadata.deletionGracePeriodSeconds != 0"
                    ),
                    "message": "the removal step of this delete is refused (test)",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    for obj in (policy, binding):
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(obj))
    try:
        yield
    finally:
        cluster.kubectl(
            "delete",
            "validatingadmissionpolicybinding,validatingadmissionpolicy",
            name,
            "--ignore-not-found",
        )


@pytest.fixture
def removal_refused(local_cluster: LocalCluster, namespace: str) -> Iterator[None]:
    yield from refuse_removal_by(local_cluster, namespace, DELETER)


def failed_pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"sim.multigpu.dev/fail-after": "0s"}},
        "spec": {
            "containers": [{"name": "trainer", "image": "trainer:test"}],
            "restartPolicy": "Never",
        },
    }


def test_a_pod_left_terminating_with_grace_period_zero_is_removed(
    removal_refused: None,
    local_cluster: LocalCluster,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    def left_behind() -> client.V1Pod | None:
        """A failed pod whose delete stopped after writing grace period 0, once the
        policy is in force (until then, deletes go through: try again)."""
        if not core.list_namespaced_pod(namespace).items:
            core.create_namespaced_pod(namespace, failed_pod("stuck"))
        pod = core.read_namespaced_pod("stuck", namespace)
        if pod.status.phase != "Failed":
            return None
        try:
            local_cluster.kubectl(
                "delete", "-n", namespace, "pod/stuck", "--wait=false",
                f"--as={DELETER}", "--as-group=system:masters",
            )  # fmt: skip
        except subprocess.CalledProcessError:
            pod = core.read_namespaced_pod("stuck", namespace)
            return pod if pod.metadata.deletion_grace_period_seconds == 0 else None
        return None

    pod = wait_for(left_behind, "a pod left terminating with grace period 0", timeout=60)
    assert pod.metadata.deletion_timestamp is not None
    # Nobody else deletes it: the simulated kubelet must (a real one would: it retries).
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, "the pod removed", timeout=30)

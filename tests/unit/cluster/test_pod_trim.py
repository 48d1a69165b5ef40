"""What the caches keep of a pod (cluster/trim.py trim_pod): what the policies read,
nothing per pod that a job's pods share (issue 15: 10,000 pods in the operator); and of
a job (trim_job): all but the API server's bookkeeping."""

from __future__ import annotations

import copy
from typing import Any

from multigpu_operator.cluster.trim import LAST_APPLIED, trim_job, trim_pod

RUNNING: dict[str, Any] = {
    "metadata": {
        "name": "train-1",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "7",
        "creationTimestamp": "2026-11-24T01:00:00Z",
        "labels": {"multigpu.dev/job-name": "train", "multigpu.dev/attempt": "2", "team": "a"},
        "annotations": {"note": "x" * 1000},
        "ownerReferences": [{"uid": "job-uid", "controller": True, "kind": "MultiGPUJob"}],
        "managedFields": [{"manager": "kubelet"}],
    },
    "spec": {
        "nodeName": "gpu-0",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "containers": [{"name": "trainer", "image": "t", "env": [{"name": "A", "value": "1"}]}],
    },
    "status": {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "hostIP": "10.1.0.1",
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T01:00:01Z"},
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None},
        ],
        "containerStatuses": [
            {
                "name": "trainer",
                "image": "t",
                "imageID": "sha256:" + "a" * 64,
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-11-24T01:00:01Z"}},
                "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets"}],
            }
        ],
    },
}


def test_a_pod_keeps_what_the_policies_read_and_nothing_else() -> None:
    kept = trim_pod(RUNNING)
    assert kept["metadata"] == {
        "name": "train-1",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "7",
        "creationTimestamp": "2026-11-24T01:00:00Z",
        "labels": {"multigpu.dev/job-name": "train", "multigpu.dev/attempt": "2"},
        "ownerReferences": [{"uid": "job-uid"}],
    }
    assert kept["status"] == {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True"},
        ],
        "containerStatuses": [
            {
                "name": "trainer",
                "image": "t",
                "state": {"running": {"startedAt": "2026-11-24T01:00:01Z"}},
            }
        ],
    }


def test_a_pod_keeps_the_health_of_its_devices() -> None:
    health = [
        {"name": "nvidia.com/gpu", "resources": [{"resourceID": "GPU-1", "health": "Unhealthy"}]}
    ]
    pod = copy.deepcopy(RUNNING)
    pod["status"]["containerStatuses"][0]["allocatedResourcesStatus"] = health
    (kept,) = trim_pod(pod)["status"]["containerStatuses"]
    assert kept["allocatedResourcesStatus"] == health


def test_the_pods_of_a_job_share_what_they_have_in_common() -> None:
    other = copy.deepcopy(RUNNING)
    other["metadata"].update(name="train-2", uid="u-2")
    first, second = trim_pod(RUNNING), trim_pod(other)
    assert first["spec"]["tolerations"] is second["spec"]["tolerations"]
    assert first["status"]["conditions"] is second["status"]["conditions"]
    assert first["metadata"]["uid"] != second["metadata"]["uid"]


def test_a_job_keeps_all_but_the_api_servers_bookkeeping() -> None:
    job = {
        "apiVersion": "multigpu.dev/v1alpha1",
        "kind": "MultiGPUJob",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "9",
            "labels": {"team": "a"},
            "annotations": {LAST_APPLIED: '{"spec": "..."}', "note": "kept"},
            "managedFields": [{"manager": "kubectl"}, {"manager": "multigpu-operator"}],
        },
        "spec": {"replicas": 2},
        "status": {"phase": "Running"},
    }
    before = copy.deepcopy(job)
    kept = trim_job(job)
    assert job == before  # the watch's own object is left as it came
    assert kept == {
        **job,
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "9",
            "labels": {"team": "a"},
            "annotations": {"note": "kept"},
        },
    }

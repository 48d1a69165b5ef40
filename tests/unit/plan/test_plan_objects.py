"""The planner's Service and pods: DNS names, ownership, the user's template, GPUs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multigpu_operator.api import names
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import plan_job
from support.planning import (
    GPU_TOLERATION,
    NAME,
    NAMESPACE,
    UID,
    container,
    elastic,
    env,
    job,
    pod,
    template,
    trainer,
)


def test_service_is_headless_and_selects_the_job() -> None:
    svc = plan_job(job(masterPort=23456)).service
    assert svc["metadata"]["name"] == names.service_name(NAME)
    assert svc["metadata"]["namespace"] == NAMESPACE
    assert svc["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {names.LABEL_JOB_NAME: NAME},
        "ports": [{"name": "master", "port": 23456, "targetPort": 23456, "protocol": "TCP"}],
    }
    assert svc["metadata"]["labels"] == {
        names.LABEL_JOB_NAME: NAME,
        names.LABEL_MODE: "DistributedDataParallel",
        names.LABEL_MANAGED_BY: names.MANAGED_BY,
    }


def test_replica_0_dns_names_select_pod_0_alone() -> None:
    state = plan_job(job(replicas=3, dnsNames="Replica0"))
    assert state.service["spec"]["selector"] == {
        names.LABEL_JOB_NAME: NAME,
        names.LABEL_REPLICA_INDEX: "0",
    }
    # Pod 0 carries the label; every pod keeps its hostname and subdomain (its own FQDN).
    assert state.pods[0]["metadata"]["labels"][names.LABEL_REPLICA_INDEX] == "0"
    assert [p["spec"]["subdomain"] for p in state.pods] == [NAME] * 3
    assert env(state.pods[2])["MASTER_ADDR"] == names.pod_dns_name(NAME, NAMESPACE, 0)


def test_pods_have_stable_dns_names() -> None:
    state = plan_job(job(replicas=3, gpusPerReplica=1))
    for i, p in enumerate(state.pods):
        spec = p["spec"]
        assert p["metadata"]["name"] == names.pod_name(NAME, i)
        assert p["metadata"]["namespace"] == NAMESPACE
        assert spec["hostname"] == names.pod_name(NAME, i)
        assert spec["subdomain"] == state.service["metadata"]["name"]
        assert f"{spec['hostname']}.{spec['subdomain']}.{NAMESPACE}.svc" == (
            names.pod_dns_name(NAME, NAMESPACE, i)
        )
        assert env(p)["MASTER_ADDR"] == names.pod_dns_name(NAME, NAMESPACE, 0)


@pytest.mark.parametrize(
    "j",
    [
        pytest.param(job(replicas=2), id="ddp"),
        pytest.param(elastic(), id="elastic"),
    ],
)
def test_every_child_is_owned_and_labelled(j: Job) -> None:
    state = plan_job(j)
    owner = {
        "apiVersion": "multigpu.dev/v1alpha1",
        "kind": "MultiGPUJob",
        "name": NAME,
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for child in (state.service, *state.pods):
        assert child["metadata"]["ownerReferences"] == [owner]
        assert child["metadata"]["namespace"] == NAMESPACE
        labels = child["metadata"]["labels"]
        assert labels[names.LABEL_JOB_NAME] == NAME
        assert labels[names.LABEL_MODE] == j.spec.mode.value
        assert labels[names.LABEL_MANAGED_BY] == names.MANAGED_BY
    assert [p["metadata"]["labels"][names.LABEL_REPLICA_INDEX] for p in state.pods] == ["0", "1"]


def test_user_template_is_kept() -> None:
    tmpl: dict[str, Any] = {
        "metadata": {
            "labels": {"team": "vision", names.LABEL_MANAGED_BY: names.MANAGED_BY},
            "annotations": {"note": "keep me"},
        },
        "spec": {
            "containers": [
                container(
                    "sidecar",
                    env=[{"name": "RANK", "value": "sidecar's own"}],
                    volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}],
                ),
                container(
                    env=[{"name": "DATA", "value": "/data"}],
                    resources={"limits": {"memory": "8Gi"}, "requests": {"nvidia.com/gpu": "2"}},
                ),
            ],
            "serviceAccountName": "trainer",
            "subdomain": NAME,
            "tolerations": [{"key": "spot", "operator": "Exists"}],
            "nodeSelector": {"pool": "a100"},
            "volumes": [{"name": "shm", "emptyDir": {}}],
            "enableServiceLinks": True,
        },
    }
    p = pod(job(gpusPerReplica=2, tmpl=copy.deepcopy(tmpl)))
    meta, spec = p["metadata"], p["spec"]
    assert meta["labels"]["team"] == "vision"
    assert meta["annotations"] == {"note": "keep me"}
    assert spec["serviceAccountName"] == "trainer"
    assert spec["enableServiceLinks"] is True
    assert spec["nodeSelector"] == {"pool": "a100"}
    assert spec["tolerations"] == [{"key": "spot", "operator": "Exists"}, GPU_TOLERATION]
    assert spec["volumes"][0] == {"name": "shm", "emptyDir": {}}
    # The side-car is not the training container: untouched.
    assert spec["containers"][0] == tmpl["spec"]["containers"][0]
    main = trainer(p)
    assert main["env"][-1] == {"name": "DATA", "value": "/data"}
    assert main["resources"] == {
        "limits": {"memory": "8Gi", "nvidia.com/gpu": "2"},
        "requests": {"nvidia.com/gpu": "2"},
    }


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        pytest.param([container("a"), container("trainer")], "trainer", id="named-trainer"),
        pytest.param([container("main"), container("logs")], "main", id="else-the-first"),
    ],
)
def test_training_container(containers: list[dict[str, Any]], expected: str) -> None:
    p = pod(job(tmpl=template(*containers)))
    touched = [c["name"] for c in p["spec"]["containers"] if "env" in c]
    assert touched == [expected]


def test_pod_defaults() -> None:
    spec = pod(job())["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["enableServiceLinks"] is False


# --- GPUs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("j", "limits", "tolerations", "node_selector", "visible"),
    [
        pytest.param(
            job(gpusPerReplica=4),
            {"nvidia.com/gpu": "4"},
            [GPU_TOLERATION],
            None,
            None,
            id="whole-gpus",
        ),
        pytest.param(
            job(gpusPerReplica=1, gpuResource="nvidia.com/mig-1g.10gb"),
            {"nvidia.com/mig-1g.10gb": "1"},
            [GPU_TOLERATION],
            None,
            None,
            id="mig-still-tolerates-gpu-taint",
        ),
        pytest.param(
            job(gpusPerReplica=8, gpuProduct="NVIDIA-H100-80GB-HBM3"),
            {"nvidia.com/gpu": "8"},
            [GPU_TOLERATION],
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            None,
            id="product-selector",
        ),
        pytest.param(
            job(gpusPerReplica=0),
            None,
            None,
            None,
            "void",
            id="cpu-only-hides-gpus-no-toleration",
        ),
        pytest.param(
            job(gpusPerReplica=1, tmpl=template(tolerations=[{"operator": "Exists"}])),
            {"nvidia.com/gpu": "1"},
            [{"operator": "Exists"}],
            None,
            None,
            id="equivalent-toleration-not-duplicated",
        ),
    ],
)
def test_gpu_requests(
    j: Job,
    limits: dict[str, str] | None,
    tolerations: list[dict[str, str]] | None,
    node_selector: dict[str, str] | None,
    visible: str | None,
) -> None:
    p = pod(j)
    assert trainer(p).get("resources", {}).get("limits") == limits
    assert "requests" not in trainer(p).get("resources", {})
    assert p["spec"].get("tolerations") == tolerations
    assert p["spec"].get("nodeSelector") == node_selector
    assert env(p).get("NVIDIA_VISIBLE_DEVICES") == visible


# --- /dev/shm -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("j", "volume"),
    [
        pytest.param(
            job(),
            {"name": "mgj-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            id="default-2Gi",
        ),
        pytest.param(
            job(shmSize="16Gi"),
            {"name": "mgj-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            id="sized",
        ),
        pytest.param(job(shmSize="0"), None, id="disabled"),
    ],
)
def test_shm_volume(j: Job, volume: dict[str, Any] | None) -> None:
    p = pod(j)
    mounts = trainer(p).get("volumeMounts", [])
    if volume is None:
        assert "volumes" not in p["spec"]
        assert mounts == []
    else:
        assert p["spec"]["volumes"] == [volume]
        assert mounts == [{"name": "mgj-shm", "mountPath": "/dev/shm"}]


def test_own_shm_mount_is_kept_when_shm_size_is_zero() -> None:
    mount = {"name": "big", "mountPath": "/dev/shm"}
    p = pod(job(shmSize="0", tmpl=template(container(volumeMounts=[mount]))))
    assert trainer(p)["volumeMounts"] == [mount]


# --- conflicts ----------------------------------------------------------------------------


def test_a_queued_job_s_pods_are_no_kueue_pod_group() -> None:
    # Kueue admits the job through its Workload (policy/steps/queueing.py); pods labelled as a
    # pod group would be queued a second time by Kueue's pod integration.
    queued = Job.from_object(
        {
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                "uid": UID,
                "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            },
            "spec": {"mode": "DistributedDataParallel", "replicas": 3, "template": template()},
        }
    )
    for p in plan_job(queued).pods:
        assert not [k for k in p["metadata"]["labels"] if k.startswith("kueue.x-k8s.io/")]
        assert "annotations" not in p["metadata"]


def test_scheduler_name_and_priority_class_pass_through() -> None:
    tmpl = template(schedulerName="volcano", priorityClassName="high")
    spec = pod(job(tmpl=tmpl))["spec"]
    assert (spec["schedulerName"], spec["priorityClassName"]) == ("volcano", "high")

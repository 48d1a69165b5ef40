"""The planner: a MultiGPUJob -> its Service and pods (pure, no cluster)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from multigpu_operator.api import names
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import DesiredState, PlanError, plan_job

NAME = "demo"
NAMESPACE = "ml"
UID = "5f0c-uid"
MASTER = f"{NAME}-0.{NAME}.{NAMESPACE}.svc"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
ELASTIC = {"minReplicas": 1, "maxReplicas": 4}
COMMON = [
    "MGJ_JOB_NAME",
    "MGJ_JOB_NAMESPACE",
    "MGJ_JOB_UID",
    "MGJ_MODE",
    "MGJ_REPLICA_INDEX",
    "MGJ_REPLICAS",
    "MGJ_GPUS_PER_REPLICA",
    "MGJ_BACKEND",
    "PYTHONUNBUFFERED",
]
# What the c10d rendezvous handler reads from --rdzv-conf.
C10D_KEYS = {
    "join_timeout",
    "last_call_timeout",
    "close_timeout",
    "heartbeat_timeout",
    "keep_alive_interval",
    "keep_alive_max_attempt",
    "read_timeout",
    "is_host",
}


# --- builders ---------------------------------------------------------------------------


def container(name: str = "trainer", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "train:1", **fields}


def template(*containers: dict[str, Any], **pod_spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers) or [container()], **pod_spec}}


def job(
    mode: str = "DistributedDataParallel", tmpl: dict[str, Any] | None = None, **spec: Any
) -> Job:
    """A job as the API server would hand it over; `spec` keys are the CRD's (camelCase)."""
    return Job.from_object(
        {
            "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": UID},
            "spec": {"mode": mode, **spec, "template": tmpl or template()},
        }
    )


def elastic(**spec: Any) -> Job:
    return job("Elastic", **{"replicas": 2, "gpusPerReplica": 2, "elastic": ELASTIC, **spec})


def trainer(pod: dict[str, Any], name: str = "trainer") -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def env(pod: dict[str, Any], name: str = "trainer") -> dict[str, Any]:
    """Variable -> value (or its valueFrom)."""
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in trainer(pod, name)["env"]}


def pod(j: Job, index: int = 0) -> dict[str, Any]:
    return plan_job(j).pods[index]


# --- env contract -----------------------------------------------------------------------

STATIC_ONLY = ["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NNODES", "NODE_RANK", "NPROC_PER_NODE"]
PER_PROCESS = ["RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"]


@pytest.mark.parametrize(
    ("j", "index", "expected", "absent"),
    [
        pytest.param(
            job(replicas=3, gpusPerReplica=2, launcher="Script"),
            1,
            {
                "WORLD_SIZE": "6",
                "MASTER_ADDR": MASTER,
                "MASTER_PORT": "29500",
                "NNODES": "3",
                "NODE_RANK": "1",
                "NPROC_PER_NODE": "2",
                "PET_NNODES": "3",
                "PET_NODE_RANK": "1",
                "PET_NPROC_PER_NODE": "2",
                "PET_MASTER_ADDR": MASTER,
                "PET_MASTER_PORT": "29500",
            },
            PER_PROCESS,
            id="ddp-3x2-script-world-counts-processes-no-rank",
        ),
        pytest.param(
            job(replicas=3, gpusPerReplica=2, launcher="Torchrun"),
            2,
            {"WORLD_SIZE": "6", "PET_NNODES": "3", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": "2"},
            PER_PROCESS,
            id="ddp-3x2-torchrun-pet",
        ),
        pytest.param(
            job(replicas=3, gpusPerReplica=1, launcher="Script"),
            2,
            {
                "WORLD_SIZE": "3",
                "RANK": "2",
                "LOCAL_RANK": "0",
                "LOCAL_WORLD_SIZE": "1",
                "NODE_RANK": "2",
                "PET_NPROC_PER_NODE": "1",
            },
            [],
            id="ddp-3x1-script-rank-per-pod",
        ),
        pytest.param(
            job(replicas=2, gpusPerReplica=0, launcher="Script"),
            1,
            {
                "WORLD_SIZE": "2",
                "RANK": "1",
                "MGJ_BACKEND": "gloo",
                "NVIDIA_VISIBLE_DEVICES": "void",
            },
            [],
            id="ddp-cpu-one-process-per-pod-gloo",
        ),
        pytest.param(
            job("DataParallel", gpusPerReplica=4),
            0,
            {
                "WORLD_SIZE": "1",
                "RANK": "0",
                "LOCAL_RANK": "0",
                "LOCAL_WORLD_SIZE": "1",
                "PET_NNODES": "1",
                "PET_NPROC_PER_NODE": "1",
                "MGJ_GPUS_PER_REPLICA": "4",
                "MGJ_BACKEND": "nccl",
            },
            ["NVIDIA_VISIBLE_DEVICES", "MGJ_PIPELINE_STAGES"],
            id="data-parallel-one-process-4-gpus",
        ),
        pytest.param(
            job("ModelParallel", gpusPerReplica=4),
            0,
            {
                "MGJ_PIPELINE_STAGES": "4",
                "MGJ_MICRO_BATCHES": "4",
                "MGJ_PIPELINE_SCHEDULE": "GPipe",
                "WORLD_SIZE": "1",
                "RANK": "0",
                "PET_NPROC_PER_NODE": "1",
            },
            [],
            id="model-parallel-one-pod-stage-per-gpu",
        ),
        pytest.param(
            job(
                "ModelParallel",
                gpusPerReplica=2,
                modelParallel={"stages": 3, "microBatches": 8, "schedule": "1F1B"},
            ),
            0,
            {
                "MGJ_PIPELINE_STAGES": "3",
                "MGJ_MICRO_BATCHES": "8",
                "MGJ_PIPELINE_SCHEDULE": "1F1B",
                "WORLD_SIZE": "1",
            },
            [],
            id="model-parallel-one-pod-explicit-stages",
        ),
        pytest.param(
            job("ModelParallel", gpusPerReplica=0),
            0,
            {"MGJ_PIPELINE_STAGES": "1", "MGJ_BACKEND": "gloo"},
            [],
            id="model-parallel-one-pod-cpu",
        ),
        pytest.param(
            job("ModelParallel", replicas=2, gpusPerReplica=2),
            1,
            {
                "MGJ_PIPELINE_STAGES": "4",
                "WORLD_SIZE": "4",
                "PET_NNODES": "2",
                "PET_NPROC_PER_NODE": "2",
                "NODE_RANK": "1",
            },
            PER_PROCESS,
            id="model-parallel-2x2-stage-per-process",
        ),
        pytest.param(
            elastic(),
            1,
            {
                "PET_NNODES": "1:4",
                "PET_NPROC_PER_NODE": "2",
                "PET_RDZV_BACKEND": "c10d",
                "PET_RDZV_ENDPOINT": f"{MASTER}:29500",
                "PET_RDZV_ID": UID,
                "PET_MAX_RESTARTS": "3",
                "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
                "PET_LOCAL_ADDR": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
            },
            [
                *STATIC_ONLY,
                *PER_PROCESS,
                "PET_NODE_RANK",
                "PET_MASTER_ADDR",
                "PET_MASTER_PORT",
                "PET_STANDALONE",
            ],
            id="elastic-rendezvous-no-static-ranks",
        ),
        pytest.param(
            elastic(masterPort=23456, elastic={**ELASTIC, "maxRestarts": 7}, gpusPerReplica=0),
            0,
            {
                "PET_RDZV_ENDPOINT": f"{MASTER}:23456",
                "PET_MAX_RESTARTS": "7",
                "PET_NPROC_PER_NODE": "1",
                "MGJ_BACKEND": "gloo",
            },
            ["WORLD_SIZE", "RANK"],
            id="elastic-cpu-custom-port-restarts",
        ),
    ],
)
def test_env_per_mode_and_size(
    j: Job, index: int, expected: dict[str, Any], absent: list[str]
) -> None:
    got = env(pod(j, index))
    assert {k: got.get(k) for k in expected} == expected
    assert [k for k in absent if k in got] == []


@pytest.mark.parametrize(
    "j",
    [
        pytest.param(job(replicas=3, gpusPerReplica=2), id="ddp"),
        pytest.param(job("DataParallel", gpusPerReplica=4), id="data-parallel"),
        pytest.param(job("ModelParallel", replicas=3, gpusPerReplica=1), id="model-parallel"),
        pytest.param(elastic(replicas=3), id="elastic"),
    ],
)
def test_common_env_comes_first(j: Job) -> None:
    state = plan_job(j)
    for i, p in enumerate(state.pods):
        got = env(p)
        assert list(got)[: len(COMMON)] == COMMON
        assert got["MGJ_JOB_NAME"] == NAME
        assert got["MGJ_JOB_NAMESPACE"] == NAMESPACE
        assert got["MGJ_JOB_UID"] == UID
        assert got["MGJ_MODE"] == j.spec.mode.value
        assert got["MGJ_REPLICA_INDEX"] == str(i)
        assert got["MGJ_REPLICAS"] == str(len(state.pods))
        assert got["MGJ_GPUS_PER_REPLICA"] == str(j.spec.gpus_per_replica)
        assert got["PYTHONUNBUFFERED"] == "1"
        assert all(isinstance(v.get("value", ""), str) for v in trainer(p)["env"])


def test_rendezvous_conf_uses_only_c10d_keys_and_pins_the_host() -> None:
    state = plan_job(elastic(replicas=3))
    confs = [dict(kv.split("=") for kv in env(p)["PET_RDZV_CONF"].split(",")) for p in state.pods]
    for conf in confs:
        assert set(conf) <= C10D_KEYS
        assert "timeout" not in conf
        assert conf["join_timeout"] == "600"
    assert [c["is_host"] for c in confs] == ["true", "false", "false"]


@pytest.mark.parametrize(
    ("j", "world_size"),
    [
        pytest.param(job(replicas=3, gpusPerReplica=2), 6, id="ddp-3x2"),
        pytest.param(job(replicas=3, gpusPerReplica=0), 3, id="ddp-cpu"),
        pytest.param(job("DataParallel", gpusPerReplica=4), 1, id="data-parallel"),
        pytest.param(job("ModelParallel", gpusPerReplica=4), 1, id="model-parallel-one-pod"),
        pytest.param(
            job("ModelParallel", replicas=2, gpusPerReplica=2), 4, id="model-parallel-2x2"
        ),
        pytest.param(elastic(), None, id="elastic"),
    ],
)
def test_world_size(j: Job, world_size: int | None) -> None:
    state = plan_job(j)
    assert state.world_size == world_size
    if world_size is not None:
        assert {env(p)["WORLD_SIZE"] for p in state.pods} == {str(world_size)}


def test_elastic_replicas_override() -> None:
    j = elastic(replicas=2)
    scaled = plan_job(j, replicas=4)
    assert [p["metadata"]["name"] for p in scaled.pods] == [f"{NAME}-{i}" for i in range(4)]
    assert {env(p)["PET_NNODES"] for p in scaled.pods} == {"1:4"}
    assert {env(p)["MGJ_REPLICAS"] for p in scaled.pods} == {"4"}
    assert scaled.world_size is None
    down = plan_job(j, replicas=1)
    assert [p["metadata"]["name"] for p in down.pods] == [f"{NAME}-0"]


def test_replicas_override_resizes_a_static_world() -> None:
    state = plan_job(job(replicas=1, gpusPerReplica=2), replicas=3)
    assert len(state.pods) == 3
    assert state.world_size == 6
    assert env(state.pods[2])["WORLD_SIZE"] == "6"


# --- pods and Service ---------------------------------------------------------------------


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

C = "spec.template.spec.containers[trainer]"


@pytest.mark.parametrize(
    ("j", "field"),
    [
        pytest.param(
            job(tmpl=template(container(env=[{"name": "WORLD_SIZE", "value": "2"}]))),
            f"{C}.env[WORLD_SIZE]",
            id="env-world-size",
        ),
        pytest.param(
            job(
                gpusPerReplica=0, tmpl=template(container(env=[{"name": "NVIDIA_VISIBLE_DEVICES"}]))
            ),
            f"{C}.env[NVIDIA_VISIBLE_DEVICES]",
            id="env-visible-devices-on-cpu",
        ),
        pytest.param(
            elastic(tmpl=template(container(env=[{"name": "PET_NNODES", "value": "2"}]))),
            f"{C}.env[PET_NNODES]",
            id="env-pet-nnodes-elastic",
        ),
        pytest.param(
            job(tmpl=template(hostname="mine")),
            "spec.template.spec.hostname",
            id="hostname",
        ),
        pytest.param(
            job(tmpl=template(subdomain="other")),
            "spec.template.spec.subdomain",
            id="subdomain",
        ),
        pytest.param(
            job(tmpl=template(restartPolicy="OnFailure")),
            "spec.template.spec.restartPolicy",
            id="restart-policy",
        ),
        pytest.param(
            job(
                gpusPerReplica=2,
                tmpl=template(container(resources={"limits": {"nvidia.com/gpu": 1}})),
            ),
            f"{C}.resources.limits[nvidia.com/gpu]",
            id="gpu-limit",
        ),
        pytest.param(
            job(
                gpusPerReplica=2,
                tmpl=template(container(resources={"requests": {"nvidia.com/gpu": "4"}})),
            ),
            f"{C}.resources.requests[nvidia.com/gpu]",
            id="gpu-request",
        ),
        pytest.param(
            job(
                gpusPerReplica=0,
                tmpl=template(container(resources={"limits": {"nvidia.com/gpu": "1"}})),
            ),
            f"{C}.resources.limits[nvidia.com/gpu]",
            id="gpu-limit-on-cpu-job",
        ),
        pytest.param(
            job(
                gpuProduct="NVIDIA-H100-80GB-HBM3",
                tmpl=template(nodeSelector={"nvidia.com/gpu.product": "A100"}),
            ),
            "spec.template.spec.nodeSelector[nvidia.com/gpu.product]",
            id="gpu-product-selector",
        ),
        pytest.param(
            job(tmpl=template(container(volumeMounts=[{"name": "x", "mountPath": "/dev/shm/"}]))),
            f"{C}.volumeMounts[/dev/shm]",
            id="shm-mount",
        ),
        pytest.param(
            job(tmpl=template(volumes=[{"name": "mgj-shm", "emptyDir": {}}])),
            "spec.template.spec.volumes[mgj-shm]",
            id="shm-volume-name",
        ),
        pytest.param(
            job(tmpl={**template(), "metadata": {"labels": {names.LABEL_JOB_NAME: "other"}}}),
            f"spec.template.metadata.labels[{names.LABEL_JOB_NAME}]",
            id="label",
        ),
        pytest.param(
            job(tmpl={**template(), "metadata": {"name": "pinned"}}),
            "spec.template.metadata.name",
            id="template-name",
        ),
        pytest.param(
            job(tmpl={"spec": {"containers": []}}),
            "spec.template.spec.containers",
            id="no-containers",
        ),
        pytest.param(job("DataParallel", replicas=2), "spec.replicas", id="data-parallel-2-pods"),
        pytest.param(job(replicas=0), "spec.replicas", id="zero-replicas"),
        pytest.param(
            job("ModelParallel", replicas=2, gpusPerReplica=2, modelParallel={"stages": 3}),
            "spec.modelParallel.stages",
            id="stages-not-one-per-process",
        ),
        pytest.param(
            job(modelParallel={"stages": 2}), "spec.modelParallel", id="model-parallel-on-ddp"
        ),
        pytest.param(job(elastic=ELASTIC), "spec.elastic", id="elastic-on-ddp"),
        pytest.param(job("Elastic"), "spec.elastic", id="elastic-without-policy"),
        pytest.param(elastic(launcher="Script"), "spec.launcher", id="elastic-script"),
        pytest.param(elastic(replicas=5), "spec.replicas", id="elastic-above-max"),
        pytest.param(
            elastic(elastic={"minReplicas": 3, "maxReplicas": 2}),
            "spec.elastic.maxReplicas",
            id="elastic-max-below-min",
        ),
    ],
)
def test_conflicts_name_the_field(j: Job, field: str) -> None:
    with pytest.raises(PlanError) as err:
        plan_job(j)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_conflicting_env_says_the_operator_sets_it() -> None:
    j = job(tmpl=template(container(env=[{"name": "MASTER_ADDR", "value": "x"}])))
    with pytest.raises(PlanError, match=r"env\[MASTER_ADDR\]: is set by the operator .*remove it"):
        plan_job(j)


def test_shm_conflict_says_how_to_fix_it() -> None:
    j = job(tmpl=template(container(volumeMounts=[{"name": "x", "mountPath": "/dev/shm"}])))
    with pytest.raises(PlanError, match=r'remove this mount or set spec.shmSize to "0"'):
        plan_job(j)


def test_elastic_override_outside_range_is_an_error() -> None:
    with pytest.raises(PlanError, match=r"^spec.replicas: is 5, outside spec.elastic \[1, 4\]"):
        plan_job(elastic(), replicas=5)


def test_bad_job_name() -> None:
    bad = Job.from_object(
        {"metadata": {"name": "1st.job", "uid": UID}, "spec": {"mode": "Elastic"}}
    )
    with pytest.raises(PlanError) as err:
        plan_job(bad)
    assert err.value.field == "metadata.name"


def test_plan_error_is_a_value_error() -> None:
    err = PlanError("spec.replicas", "is 0")
    assert isinstance(err, ValueError)
    assert str(err) == "spec.replicas: is 0"


# --- determinism --------------------------------------------------------------------------


def dump(state: DesiredState) -> str:
    return json.dumps([state.service, list(state.pods), state.world_size])


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: job(replicas=3, gpusPerReplica=2), id="ddp"),
        pytest.param(lambda: job("ModelParallel", gpusPerReplica=2), id="model-parallel"),
        pytest.param(elastic, id="elastic"),
    ],
)
def test_same_job_same_bytes(build: Callable[[], Job]) -> None:
    first = build()
    before = copy.deepcopy(dict(first.spec.template))
    assert dump(plan_job(first)) == dump(plan_job(first)) == dump(plan_job(build()))
    # The job itself is not modified.
    assert dict(first.spec.template) == before

"""The planner's env contract per mode and size (pure, no cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.plan import plan_job
from support.planning import (
    ELASTIC,
    MASTER,
    NAME,
    NAMESPACE,
    UID,
    elastic,
    env,
    job,
    pod,
    trainer,
)

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


def test_the_metrics_port_is_defaulted_and_the_job_may_choose_its_own() -> None:
    # The one operator variable a job may set: the port its trainers serve metrics on.
    assert env(pod(job()))["MGJ_TRAINER_METRICS_PORT"] == "9300"
    own = {
        "containers": [
            {
                "name": "trainer",
                "image": "t:1",
                "env": [{"name": "MGJ_TRAINER_METRICS_PORT", "value": "0"}],
            }
        ]
    }
    names = [v["name"] for v in trainer(pod(job(tmpl={"spec": own})))["env"]]
    assert names.count("MGJ_TRAINER_METRICS_PORT") == 1
    assert env(pod(job(tmpl={"spec": own})))["MGJ_TRAINER_METRICS_PORT"] == "0"

"""A set-up that cannot train fails at once with a message that says what to fix."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from multigpu_train import config, dist_pipeline, imagefolder, sharding
from multigpu_train.devices import select_backend, select_device, select_devices
from multigpu_train.errors import SETUP_ERROR_EXIT_CODE, SetupError
from multigpu_train.world import read_world
from training import procs

WORLD_CASES = [
    pytest.param(
        {"WORLD_SIZE": "2"},
        "WORLD_SIZE=2 but RANK, MASTER_ADDR, MASTER_PORT not set",
        id="world-without-rendezvous",
    ),
    pytest.param(
        {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "h"},
        "MASTER_PORT not set",
        id="no-master-port",
    ),
    pytest.param(
        {"WORLD_SIZE": "4", "NPROC_PER_NODE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
        "start it with torchrun",
        id="several-processes-without-torchrun",
    ),
    pytest.param(
        {"MGJ_REPLICAS": "3"},
        "WORLD_SIZE is not set but the job runs 3 processes",
        id="pods-without-world-size",
    ),
    pytest.param(
        {"TORCHELASTIC_RUN_ID": "x"},
        "WORLD_SIZE is not set",
        id="torchrun-without-world-size",
    ),
    pytest.param(
        {"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
        "RANK=2 is outside 0..1",
        id="rank-out-of-range",
    ),
    pytest.param({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer", id="not-a-number"),
    pytest.param(
        {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "70000"},
        "MASTER_PORT=70000 is not a TCP port",
        id="bad-port",
    ),
]


@pytest.mark.parametrize(("environ", "message"), WORLD_CASES)
def test_broken_launch_contract(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SetupError, match=message):
        read_world(environ)


def test_contract_of_a_one_process_pod_is_read() -> None:
    world = read_world(
        {
            "WORLD_SIZE": "4",
            "RANK": "3",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "job-0.job.ns.svc",
            "MASTER_PORT": "29500",
            "MGJ_JOB_NAME": "job",
            "MGJ_MODE": "DistributedDataParallel",
            "TORCHELASTIC_RESTART_COUNT": "2",
        }
    )
    assert (world.rank, world.world_size, world.local_rank) == (3, 4, 0)
    assert (world.master_addr, world.master_port, world.job_name) == (
        "job-0.job.ns.svc",
        29500,
        "job",
    )
    assert world.restart_count == 2
    assert read_world({}).world_size == 1


DEVICE_CASES = [
    pytest.param(
        "auto",
        {"MGJ_GPUS_PER_REPLICA": "2"},
        0,
        0,
        "MGJ_GPUS_PER_REPLICA=2 but no CUDA device",
        id="gpus-asked-none-seen",
    ),
    pytest.param("cuda", {}, 0, 0, "--device cuda but no CUDA device", id="cuda-flag-none-seen"),
    pytest.param(
        "auto",
        {"MGJ_GPUS_PER_REPLICA": "2"},
        2,
        2,
        "LOCAL_RANK=2 but only 2 CUDA device",
        id="more-ranks-than-gpus",
    ),
    pytest.param(
        "auto", {"MGJ_GPUS_PER_REPLICA": "x"}, 0, 0, "MGJ_GPUS_PER_REPLICA='x'", id="not-a-number"
    ),
]


@pytest.mark.parametrize(
    ("requested", "environ", "cuda_count", "local_rank", "message"), DEVICE_CASES
)
def test_gpu_set_up_errors(
    requested: str, environ: dict[str, str], cuda_count: int, local_rank: int, message: str
) -> None:
    with pytest.raises(SetupError, match=message):
        select_device(requested, local_rank, environ, cuda_count)


@pytest.mark.parametrize(
    ("requested", "environ", "cuda_count", "local_rank", "expected"),
    [
        ("auto", {"MGJ_GPUS_PER_REPLICA": "0", "NVIDIA_VISIBLE_DEVICES": "void"}, 0, 0, "cpu"),
        # GPUs hidden on purpose: asking for them in the spec is then not an error.
        ("auto", {"MGJ_GPUS_PER_REPLICA": "1", "NVIDIA_VISIBLE_DEVICES": "void"}, 0, 0, "cpu"),
        ("cpu", {"MGJ_GPUS_PER_REPLICA": "4"}, 0, 0, "cpu"),
        ("cpu", {}, 2, 1, "cpu"),
        ("auto", {"MGJ_GPUS_PER_REPLICA": "2"}, 2, 1, "cuda:1"),
        ("auto", {}, 1, 0, "cuda:0"),
    ],
)
def test_device_choice(
    requested: str, environ: dict[str, str], cuda_count: int, local_rank: int, expected: str
) -> None:
    assert str(select_device(requested, local_rank, environ, cuda_count)) == expected


def test_backend_follows_the_device() -> None:
    import torch

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert select_backend("auto", cpu) == "gloo"
    assert select_backend("auto", gpu) == "nccl"
    assert select_backend("nccl", gpu) == "nccl"
    # A GPU job run on the CPU on purpose (MGJ_DEVICE=cpu) cannot use NCCL.
    assert select_backend("nccl", cpu) == "gloo"
    assert [str(d) for d in select_devices("auto", {}, 3)] == ["cuda:0", "cuda:1", "cuda:2"]


@pytest.mark.parametrize(
    ("environ", "argv", "message"),
    [
        ({"MGJ_EPOCHS": "ten"}, [], "MGJ_EPOCHS='ten'"),
        ({"MGJ_BACKEND": "mpi"}, [], "MGJ_BACKEND='mpi': expected one of auto, gloo, nccl"),
        ({"MGJ_MODEL": "resnet"}, [], "MGJ_MODEL='resnet'"),
        ({}, ["--batch-size", "0"], "--batch-size must be at least 1"),
        ({"MGJ_DATASET": "folder"}, [], "needs --data-dir"),
        ({"MGJ_PRECISION": "fp8"}, [], "MGJ_PRECISION='fp8': expected one of fp32, bf16, fp16"),
        ({"MGJ_CHECKPOINT_TIMEOUT_SECONDS": "0"}, [], "--checkpoint-timeout must be positive"),
        ({}, ["--checkpoint-every-steps", "-1"], "--checkpoint-every-steps must be 0"),
    ],
)
def test_bad_settings(environ: dict[str, str], argv: list[str], message: str) -> None:
    with pytest.raises(SetupError, match=message):
        config.parse(argv, environ, groups=("common", "ddp", "pipeline"))


def test_flag_wins_over_variable_wins_over_default() -> None:
    environ = {"MGJ_EPOCHS": "3", "MGJ_BATCH_SIZE": "8", "MGJ_DATA_DIR": "/data"}
    cfg = config.parse(["--epochs", "5"], environ, groups=("common",))
    assert (cfg.epochs, cfg.batch_size, cfg.lr) == (5, 8, config.TrainConfig().lr)
    # A data directory alone selects the folder data set.
    assert cfg.dataset == "folder"
    ddp = config.parse(
        [],
        {"MGJ_GRAD_ACCUM_STEPS": "4", "MGJ_DDP_GRADIENT_AS_BUCKET_VIEW": "no"},
        groups=("common", "ddp"),
    )
    assert (ddp.grad_accum_steps, ddp.gradient_as_bucket_view) == (4, False)
    checkpoints = config.parse(
        ["--checkpoint-timeout", "90"],
        {
            "MGJ_PRECISION": "bf16",
            "MGJ_CHECKPOINT_EVERY_STEPS": "50",
            "MGJ_CHECKPOINT_TIMEOUT_SECONDS": "3600",
        },
    )
    assert (checkpoints.precision, checkpoints.checkpoint_every_steps) == ("bf16", 50)
    assert (checkpoints.checkpoint_timeout, checkpoints.init_timeout) == (90.0, 600.0)


@pytest.mark.parametrize(
    ("flags", "world", "message"),
    [
        (["--stages", "3"], 2, "MGJ_PIPELINE_STAGES=3 but WORLD_SIZE=2"),
        (["--schedule", "1F1B", "--micro-batches", "2"], 4, "1F1B schedule needs at least"),
        (["--batch-size", "30", "--micro-batches", "4"], 2, "not a multiple of MGJ_MICRO_BATCHES"),
    ],
)
def test_bad_pipeline_settings(flags: list[str], world: int, message: str) -> None:
    cfg = config.parse(flags, {}, groups=("common", "pipeline"))
    with pytest.raises(SetupError, match=message):
        dist_pipeline.check(cfg, world)


def test_unreadable_data_paths(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="does not exist"):
        imagefolder.load_folder(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SetupError, match="is not a directory"):
        imagefolder.load_folder(tmp_path / "file")
    with pytest.raises(SetupError, match="no class directories"):
        imagefolder.load_folder(tmp_path)
    (tmp_path / "cats").mkdir()
    with pytest.raises(SetupError, match="no images under"):
        imagefolder.load_folder(tmp_path)
    (tmp_path / "cats" / "1.png").write_bytes(b"saved by a broken exporter")
    with pytest.raises(SetupError, match=r"cannot read image .*1\.png: cannot identify image"):
        imagefolder.load_folder(tmp_path)


# The same failures, end to end: a non-zero exit with the message, within seconds.
PROCESS_CASES = [
    pytest.param(
        "multigpu_train.ddp",
        {"MGJ_GPUS_PER_REPLICA": "1", "NVIDIA_VISIBLE_DEVICES": "all"},
        "no CUDA device is visible",
        id="ddp-gpus-asked-none-seen",
    ),
    pytest.param(
        "multigpu_train.dp",
        {"MGJ_DATA_DIR": "/nonexistent/data"},
        "data path /nonexistent/data does not exist",
        id="dp-missing-data",
    ),
    pytest.param(
        "multigpu_train.pipeline",
        {
            "WORLD_SIZE": "2",
            "RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "1",
            "MGJ_PIPELINE_STAGES": "4",
        },
        "MGJ_PIPELINE_STAGES=4 but WORLD_SIZE=2",
        id="pipeline-stage-count",
    ),
]


@pytest.mark.parametrize(("module", "environ", "message"), PROCESS_CASES)
def test_entrypoint_exits_with_the_message(
    module: str, environ: dict[str, str], message: str, tmp_path: Path
) -> None:
    termination_log = tmp_path / "termination-log"
    termination_log.touch()  # the kubelet creates it; the trainer fills it
    env = procs.clean_env({**environ, "MGJ_TERMINATION_LOG": str(termination_log)})
    done = procs.run(module, [], env, timeout=90)
    # A code of its own, which the operator does not retry (policy/failures/failed_pods.py).
    assert done.returncode == SETUP_ERROR_EXIT_CODE == 78, done.output[-3000:]
    last_line = done.output.strip().splitlines()[-1]
    assert last_line.startswith("multigpu_train.errors.SetupError: "), done.output[-3000:]
    assert message in last_line
    assert "Traceback" not in done.output
    written = termination_log.read_text()
    assert written.startswith("SetupError: ")
    assert message in written


def test_rank_whose_master_never_comes_times_out() -> None:
    # Rank 1 of 2 with nobody listening at MASTER_ADDR:MASTER_PORT: it must give up
    # after the init timeout, not wait forever.
    env = procs.rank_env(1, 2, procs.free_port(), {"MGJ_INIT_TIMEOUT_SECONDS": "5"})
    started = time.monotonic()
    done = procs.run("multigpu_train.ddp", [], env, timeout=120)
    assert done.returncode != 0
    assert "timed out" in done.output.lower() or "timeout" in done.output.lower(), done.output[
        -3000:
    ]
    assert time.monotonic() - started < 100


@pytest.mark.parametrize(
    ("kind", "precision", "world_size", "environ", "message"),
    [
        pytest.param(
            "hybrid", "bf16", 6, {"LOCAL_WORLD_SIZE": "4"},
            "WORLD_SIZE=6 is not a multiple of it", id="hybrid-world-not-whole-pods",
        ),
        pytest.param(
            "full", "fp16", 4, {}, "--precision fp16 is not supported", id="sharded-fp16"
        ),
    ],
)  # fmt: skip
def test_sharding_that_cannot_work(
    kind: str, precision: str, world_size: int, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SetupError, match=message):
        sharding.check(kind, precision, world_size, environ)


def test_processes_per_pod_for_the_hybrid_mesh() -> None:
    # torchrun's (and the operator's one-process pods') LOCAL_WORLD_SIZE first.
    assert sharding.per_pod({"LOCAL_WORLD_SIZE": "4", "PET_NPROC_PER_NODE": "8"}) == 4
    assert sharding.per_pod({"PET_NPROC_PER_NODE": "8", "NPROC_PER_NODE": "2"}) == 8
    assert sharding.per_pod({"NPROC_PER_NODE": "2"}) == 2
    assert sharding.per_pod({"PET_NPROC_PER_NODE": "gpu"}) == 1
    assert sharding.mesh_shape("hybrid", 8, 4) == (2, 4)
    assert sharding.mesh_shape("full", 8, 4) == (8,)
    sharding.check("none", "fp16", 3, {"LOCAL_WORLD_SIZE": "2"})  # DDP: no mesh

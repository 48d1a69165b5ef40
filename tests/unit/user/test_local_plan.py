"""`mgj run --local` planning (pure): planned pods -> local processes, and the run's result."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.local.kubelet import expand
from multigpu_operator.local.machine import Machine, parse_visible_devices
from multigpu_operator.local.outcome import PodExit, container_exit_code, job_outcome
from multigpu_operator.local.plan import LocalPlan, LocalPlanError, plan_local
from multigpu_operator.plan import plan_job

PORT = 41234
BIN = "/repo/.venv/bin"
SCRATCH = "/tmp/scratch"
ELASTIC = {"minReplicas": 1, "maxReplicas": 4}
# Operator variables a local run changes; every other planned variable is kept as is.
REWRITTEN = {
    "MASTER_ADDR",
    "MASTER_PORT",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_RDZV_ENDPOINT",
    "PET_LOCAL_ADDR",
    "PET_NNODES",
    "MGJ_BACKEND",
}
# Defaulted operator variables a local run leaves out unless the job sets them.
DROPPED = {"MGJ_TRAINER_METRICS_PORT"}


# --- builders ---------------------------------------------------------------------------


def job(mode: str = "DistributedDataParallel", container: Any = None, **spec: Any) -> Job:
    trainer = {"name": "trainer", "image": "train:1", "command": ["python", "train.py"]}
    pod_spec = dict(spec.pop("pod_spec", {}))
    containers = [{**trainer, **(container or {})}, *pod_spec.pop("containers", [])]
    return Job.from_object(
        {
            "metadata": {"name": "demo", "namespace": "ml", "uid": "uid-1"},
            "spec": {
                "mode": mode,
                **spec,
                "template": {"spec": {**pod_spec, "containers": containers}},
            },
        }
    )


def machine(gpus: str = "", cpus: int = 8, environ: dict[str, str] | None = None) -> Machine:
    return Machine(
        gpus=parse_visible_devices(gpus),
        cpus=cpus,
        hostname="laptop",
        python_bin_dir=BIN,
        environ={"PATH": "/usr/bin", "HOME": "/home/me", **(environ or {})},
        scratch_dir=SCRATCH,
    )


def local(j: Job, m: Machine | None = None, *, cpu: bool = False) -> LocalPlan:
    return plan_local(j, plan_job(j), m or machine(), port=PORT, cpu=cpu)


def envs(j: Job, m: Machine | None = None, *, cpu: bool = False) -> list[dict[str, str]]:
    return [dict(p.env) for p in local(j, m, cpu=cpu).processes]


# --- env per mode -------------------------------------------------------------------------

DDP_SCRIPT = job(replicas=2, gpusPerReplica=0, launcher="Script")
DDP_TORCHRUN = job(replicas=2, gpusPerReplica=2)
ELASTIC_JOB = job("Elastic", replicas=2, gpusPerReplica=1, elastic=ELASTIC)
DATA_PARALLEL = job("DataParallel", gpusPerReplica=4)
MODEL_PARALLEL = job("ModelParallel", gpusPerReplica=2)
MODEL_PARALLEL_PODS = job("ModelParallel", replicas=2, gpusPerReplica=1)
ALL = [DDP_SCRIPT, DDP_TORCHRUN, ELASTIC_JOB, DATA_PARALLEL, MODEL_PARALLEL, MODEL_PARALLEL_PODS]
ADDR = {"MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1"}
PORTS = {"MASTER_PORT": str(PORT), "PET_MASTER_PORT": str(PORT)}


@pytest.mark.parametrize(
    ("j", "gpus", "cpu", "index", "expected"),
    [
        (DDP_SCRIPT, "", False, 1, {**ADDR, **PORTS, "RANK": "1", "WORLD_SIZE": "2",
            "LOCAL_RANK": "0", "MGJ_BACKEND": "gloo", "NVIDIA_VISIBLE_DEVICES": "void",
            "CUDA_VISIBLE_DEVICES": ""}),
        (DDP_TORCHRUN, "0,1,2,3", False, 1, {**ADDR, **PORTS, "WORLD_SIZE": "4",
            "PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "2",
            "MGJ_BACKEND": "nccl", "CUDA_VISIBLE_DEVICES": "2,3"}),
        (DDP_TORCHRUN, "", True, 0, {**ADDR, **PORTS, "WORLD_SIZE": "4",
            "PET_NPROC_PER_NODE": "2", "MGJ_BACKEND": "gloo", "CUDA_VISIBLE_DEVICES": "",
            "NVIDIA_VISIBLE_DEVICES": "void", "MGJ_GPUS_PER_REPLICA": "2"}),
        (ELASTIC_JOB, "0,1", False, 0, {"PET_RDZV_ENDPOINT": f"127.0.0.1:{PORT}",
            "PET_LOCAL_ADDR": "127.0.0.1", "PET_NNODES": "2:2", "PET_NPROC_PER_NODE": "1",
            "PET_RDZV_ID": "uid-1", "CUDA_VISIBLE_DEVICES": "0",
            "NVIDIA_VISIBLE_DEVICES": None}),
        (ELASTIC_JOB, "", True, 1, {"PET_RDZV_ENDPOINT": f"127.0.0.1:{PORT}",
            "PET_NNODES": "2:2", "MGJ_BACKEND": "gloo", "CUDA_VISIBLE_DEVICES": ""}),
        (DATA_PARALLEL, "0,1,2,3", False, 0, {**ADDR, **PORTS, "WORLD_SIZE": "1", "RANK": "0",
            "CUDA_VISIBLE_DEVICES": "0,1,2,3", "MGJ_BACKEND": "nccl"}),
        (DATA_PARALLEL, "", True, 0, {"WORLD_SIZE": "1", "RANK": "0",
            "MGJ_GPUS_PER_REPLICA": "4", "MGJ_BACKEND": "gloo", "CUDA_VISIBLE_DEVICES": ""}),
        (MODEL_PARALLEL, "0,1", False, 0, {**ADDR, **PORTS, "WORLD_SIZE": "1",
            "MGJ_PIPELINE_STAGES": "2", "CUDA_VISIBLE_DEVICES": "0,1"}),
        (MODEL_PARALLEL_PODS, "", True, 1, {**ADDR, **PORTS, "WORLD_SIZE": "2", "RANK": "1",
            "MGJ_PIPELINE_STAGES": "2", "MGJ_BACKEND": "gloo", "CUDA_VISIBLE_DEVICES": ""}),
    ],
    ids=["ddp-script", "ddp-torchrun", "ddp-torchrun-cpu", "elastic", "elastic-cpu",
         "data-parallel", "data-parallel-cpu", "model-parallel", "model-parallel-pods-cpu"],
)  # fmt: skip
def test_env_per_mode(
    j: Job, gpus: str, cpu: bool, index: int, expected: dict[str, str | None]
) -> None:
    env = envs(j, machine(gpus), cpu=cpu)[index]
    assert {k: env.get(k) for k in expected} == expected


@pytest.mark.parametrize("j", ALL)
def test_every_other_planned_variable_is_kept_and_no_cluster_name_is_left(j: Job) -> None:
    desired = plan_job(j)
    for pod, env in zip(desired.pods, envs(j, cpu=True), strict=True):
        planned = {v["name"]: v.get("value") for v in pod["spec"]["containers"][0]["env"]}
        kept = REWRITTEN | DROPPED
        assert {k: v for k, v in planned.items() if k not in kept} == {
            k: env[k] for k in planned if k not in kept
        }
        assert not DROPPED & env.keys()
        assert not [v for v in env.values() if ".svc" in v]


def test_a_metrics_port_the_job_sets_is_kept_locally() -> None:
    # The operator's default port would be taken by the first of the pods sharing the host.
    own = job(replicas=2, container={"env": [{"name": "MGJ_TRAINER_METRICS_PORT", "value": "0"}]})
    assert [env["MGJ_TRAINER_METRICS_PORT"] for env in envs(own, cpu=True)] == ["0", "0"]


def test_elastic_keeps_the_rendezvous_host_explicit() -> None:
    confs = [env["PET_RDZV_CONF"] for env in envs(ELASTIC_JOB, cpu=True)]
    assert [c.rsplit(",", 1)[1] for c in confs] == ["is_host=true", "is_host=false"]
    assert all("MASTER_ADDR" not in env for env in envs(ELASTIC_JOB, cpu=True))


def test_the_port_is_the_one_picked_at_run_time() -> None:
    j = job(replicas=2, gpusPerReplica=0, masterPort=29999)
    for port in (40001, 40002):
        plan = plan_local(j, plan_job(j), machine(), port=port, cpu=False)
        assert {p.env["MASTER_PORT"] for p in plan.processes} == {str(port)}
        assert {p.env["PET_MASTER_PORT"] for p in plan.processes} == {str(port)}


# --- GPUs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "replicas", "per_replica", "slices"),
    [
        ("0,1,2,3", 2, 2, ["0,1", "2,3"]),
        ("0,1,2,3", 3, 1, ["0", "1", "2"]),
        ("3,5,6,7", 2, 2, ["3,5", "6,7"]),  # CUDA_VISIBLE_DEVICES of the user's shell
        ("GPU-a,GPU-b", 1, 2, ["GPU-a,GPU-b"]),
        ("0,1", 2, 0, ["", ""]),  # a CPU job sees no GPU, as with NVIDIA_VISIBLE_DEVICES=void
    ],
)
def test_each_pod_gets_its_own_gpus(
    gpus: str, replicas: int, per_replica: int, slices: list[str]
) -> None:
    j = job(replicas=replicas, gpusPerReplica=per_replica)
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs(j, machine(gpus))] == slices


@pytest.mark.parametrize(
    ("value", "ids"),
    [("0,1", ("0", "1")), ("", ()), ("-1", ()), ("0,-1,2", ("0",)), (" 2 , 3", ("2", "3"))],
)
def test_visible_devices_are_read_as_cuda_reads_them(value: str, ids: tuple[str, ...]) -> None:
    assert parse_visible_devices(value) == ids


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        ("", "needs 4 GPUs (2 pods x 2 spec.gpusPerReplica) and this machine has none; add --cpu"),
        ("0,1", "needs 4 GPUs (2 pods x 2 spec.gpusPerReplica) and this machine has 2 (0,1)"),
    ],
)
def test_a_gpu_job_without_enough_gpus_is_refused_unless_cpu(gpus: str, message: str) -> None:
    with pytest.raises(LocalPlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        local(DDP_TORCHRUN, machine(gpus))
    assert len(local(DDP_TORCHRUN, machine(gpus), cpu=True).processes) == 2


def test_cpu_changes_nothing_for_a_cpu_job() -> None:
    assert envs(DDP_SCRIPT, cpu=True) == envs(DDP_SCRIPT)


# --- the process: command, environment, directories ----------------------------------------


def test_command_and_args_are_expanded_from_the_container_env() -> None:
    j = job(
        replicas=2,
        gpusPerReplica=0,
        container={
            "command": ["torchrun", "--node-rank=$(NODE_RANK)"],
            "args": ["train.py", "--out=$(OUT)", "$$(RANK)"],
            "env": [{"name": "OUT", "value": "/ckpt/$(MGJ_JOB_NAME)-$(RANK)"}],
        },
    )
    argv = [p.argv for p in local(j).processes]
    assert argv[1] == ("torchrun", "--node-rank=1", "train.py", "--out=/ckpt/demo-1", "$(RANK)")


def test_env_references_resolve_only_from_earlier_entries() -> None:
    j = job(
        gpusPerReplica=0,
        container={
            "env": [
                {"name": "A", "value": "$(B)-$(RANK)"},
                {"name": "B", "value": "b"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ]
        },
    )
    env = envs(j)[0]
    assert (env["A"], env["B"], env["POD"], env["IP"]) == ("$(B)-0", "b", "demo-0", "127.0.0.1")


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(X)", "x"),
        ("a$(X)b$(X)", "axbx"),
        ("$$(X)", "$(X)"),
        ("$(MISSING)", "$(MISSING)"),
        ("$(X", "$(X"),
        ("cost $5 $", "cost $5 $"),
        ("$$", "$"),
    ],
)
def test_expansion_follows_the_kubelet(text: str, expanded: str) -> None:
    assert expand(text, {"X": "x"}) == expanded


def test_the_shell_environment_is_kept_but_not_its_distributed_variables() -> None:
    shell = {
        "RANK": "7",
        "LOCAL_RANK": "3",
        "PET_NNODES": "9",
        "PET_MAX_RESTARTS": "5",
        "TORCHELASTIC_RUN_ID": "x",
        "MGJ_REPLICAS": "9",
        "MGJ_EPOCHS": "1",
    }
    env = envs(DDP_TORCHRUN, machine("", environ=shell), cpu=True)[0]
    assert (env["HOME"], env["MGJ_EPOCHS"], env["MGJ_REPLICAS"]) == ("/home/me", "1", "2")
    assert env["PATH"] == f"{BIN}:/usr/bin"
    assert env["PET_NNODES"] == "2"
    assert not {"RANK", "LOCAL_RANK", "PET_MAX_RESTARTS", "TORCHELASTIC_RUN_ID"} & set(env)


@pytest.mark.parametrize(
    ("cpus", "shell", "threads"),
    [(8, {}, "2"), (2, {}, "1"), (8, {"OMP_NUM_THREADS": "6"}, "6")],
)
def test_threads_are_shared_between_the_job_processes(
    cpus: int, shell: dict[str, str], threads: str
) -> None:
    # DDP_TORCHRUN on CPU: 2 pods x 2 processes share the machine.
    env = envs(DDP_TORCHRUN, machine("", cpus, shell), cpu=True)[0]
    assert env["OMP_NUM_THREADS"] == threads


def test_empty_dirs_become_local_directories_and_other_volumes_warn() -> None:
    j = job(
        replicas=2,
        gpusPerReplica=0,
        container={
            "args": ["--out=/scratch/ckpt", "/scratchy"],
            "workingDir": "/scratch",
            "env": [{"name": "DATA", "value": "/scratch/data:/data"}],
            "volumeMounts": [
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "data", "mountPath": "/data"},
            ],
        },
        pod_spec={
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
            ],
            "containers": [{"name": "logs", "image": "busybox"}],
        },
    )
    plan = local(j)
    pod1 = plan.processes[1]
    local_dir = f"{SCRATCH}/demo-1/scratch"
    assert pod1.argv[2:] == (f"--out={local_dir}/ckpt", "/scratchy")
    assert (pod1.working_dir, pod1.directories) == (local_dir, (local_dir,))
    assert pod1.env["DATA"] == f"{local_dir}/data:/data"
    assert any("/dev/shm" in note for note in plan.notes)
    assert plan.warnings == (
        "volume 'data' (persistentVolumeClaim) at /data is not mounted by a local run: "
        "/data is this machine's own",
        "container 'logs' is not run locally: only the training container is",
    )


def test_the_grace_period_is_the_pods() -> None:
    assert local(DDP_SCRIPT).processes[0].grace_period_s == 30
    j = job(gpusPerReplica=0, pod_spec={"terminationGracePeriodSeconds": 3})
    assert local(j).processes[0].grace_period_s == 3


# --- what cannot run locally ------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "message"),
    [
        (
            {"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
            r"containers\[trainer\]\.env\[TOKEN\]: comes from secretKeyRef s/k",
        ),
        (
            {"env": [{"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "lr"}}}]},
            r"env\[LR\]: comes from configMapKeyRef c/lr, which a local run cannot read",
        ),
        (
            {"envFrom": [{"configMapRef": {"name": "settings"}}]},
            r"envFrom: variables from configMapRef 'settings' cannot be read",
        ),
        (
            {"env": [{"name": "G", "valueFrom": {"fieldRef": {"fieldPath": "metadata.x"}}}]},
            r"env\[G\]: fieldRef 'metadata.x' has no value outside a cluster",
        ),
        ({"command": []}, r"command: is not set, so the image's entrypoint would run"),
    ],
)
def test_what_a_local_run_cannot_do_is_an_error_naming_the_field(
    container: dict[str, Any], message: str
) -> None:
    with pytest.raises(LocalPlanError, match=message):
        local(job(gpusPerReplica=0, container=container))


# --- the result ---------------------------------------------------------------------------


def ok(pod: int, at: float) -> PodExit:
    return PodExit(f"demo-{pod}", pod, "trainer", 0, at)


def failed(pod: int, code: int, at: float, *, stopped: bool = False) -> PodExit:
    return PodExit(f"demo-{pod}", pod, "trainer", code, at, stopped)


@pytest.mark.parametrize(
    ("exits", "phase", "code", "message"),
    [
        ([ok(1, 1.0), ok(0, 2.0)], "Succeeded", 0, "all 2 pods exited 0"),
        (
            [failed(1, 3, 1.0), failed(0, 143, 2.0, stopped=True)],
            "Failed",
            3,
            "pod demo-1 (replica 1) failed with exit code 3: Error",
        ),
        ([failed(0, 137, 5.0), failed(1, 2, 1.5)], "Failed", 2, "pod demo-1 (replica 1)"),
        ([ok(0, 1.0), failed(1, 143, 2.0, stopped=True)], "Interrupted", 130, "1 of 2 pods"),
    ],
)
def test_the_result_follows_the_operator_success_rule(
    exits: list[PodExit], phase: str, code: int, message: str
) -> None:
    outcome = job_outcome("demo", 2, exits)
    assert (outcome.phase, outcome.exit_code) == (phase, code)
    assert message in outcome.message


@pytest.mark.parametrize(("returncode", "code"), [(0, 0), (3, 3), (-9, 137), (-15, 143)])
def test_a_signal_is_reported_as_a_container_would(returncode: int, code: int) -> None:
    assert container_exit_code(returncode) == code

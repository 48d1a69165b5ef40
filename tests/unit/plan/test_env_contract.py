"""Every variable the planner sets on a training container has a reader and a line in
docs/env-contract.md, and the trainer's pipeline schedules are the API's.

A reader is the trainer package (images/trainer/multigpu_train names it), torch or
torchrun by their documented contract (checked against the installed torch's source
where torch is installed), or, for the few variables meant for a user's own script, the
list below with the reason. A variable nobody reads is a contract nobody keeps."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

from multigpu_operator.api.model_parallel import ModelParallelPolicy, PipelineSchedule
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import env, plan_job
from multigpu_train import config
from support.planning import elastic, job

ROOT = Path(__file__).resolve().parents[3]
TRAINER = ROOT / "images/trainer/multigpu_train"
ENV_DOC = ROOT / "docs/env-contract.md"

# Jobs that between them take every branch of plan/env.py and plan/modes/.
JOBS: dict[str, Job] = {
    "DataParallel": job("DataParallel", gpusPerReplica=2),
    "DDP, one GPU per pod": job(replicas=2, gpusPerReplica=1),
    "DDP, two GPUs per pod": job(replicas=2, gpusPerReplica=2, launcher="Torchrun"),
    "DDP on CPU": job(replicas=2, gpusPerReplica=0),
    "ModelParallel, one pod": job("ModelParallel", gpusPerReplica=2),
    "ModelParallel, two pods": job(
        "ModelParallel", replicas=2, gpusPerReplica=2, launcher="Torchrun"
    ),
    "Elastic": elastic(launcher="Torchrun"),
}

# Read by torch.distributed or torchrun, with the file of torch that reads them.
TORCH_READS = {
    # init_process_group(init_method="env://"): the plain-script launch style.
    "MASTER_ADDR": "distributed/rendezvous.py",
    "MASTER_PORT": "distributed/rendezvous.py",
    "RANK": "distributed/rendezvous.py",
    "WORLD_SIZE": "distributed/rendezvous.py",
    # The per-worker variables torchrun sets; a pod of one process gets them from us.
    "LOCAL_RANK": "distributed/elastic/agent/server/local_elastic_agent.py",
    "LOCAL_WORLD_SIZE": "distributed/elastic/agent/server/local_elastic_agent.py",
    # The scale-up deadlock workaround (plan/env.py elastic_env).
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "distributed/elastic/rendezvous/dynamic_rendezvous.py",
}
# Every torchrun flag is read from PET_<FLAG> (torch/distributed/argparse_util.py env).
TORCHRUN = "distributed/run.py"
# Read by other programs than ours and torch.
OTHER_READS = {
    "PYTHONUNBUFFERED": "the Python interpreter: unbuffered stdout and stderr",
}
# Set for a user's own script, documented as such, read by no code of ours.
FOR_USER_SCRIPTS = {
    "MGJ_JOB_NAMESPACE": "the job's identity, e.g. for a script's own logs or metrics",
    "MGJ_JOB_UID": "a name unique per job object, e.g. for a checkpoint path",
    "MGJ_REPLICA_INDEX": "the pod's index, known before any rendezvous",
    "NNODES": "pods, for a script's own spawner (torchrun reads PET_NNODES)",
    "NODE_RANK": "RANK = NODE_RANK * NPROC_PER_NODE + LOCAL_RANK in a script's own spawner",
}


@cache
def planned() -> frozenset[str]:
    """Every variable the planner puts on a training container, over JOBS."""
    names = set()
    for j in JOBS.values():
        for pod in plan_job(j).pods:
            trainer = next(c for c in pod["spec"]["containers"] if c["name"] == "trainer")
            names |= {var["name"] for var in trainer["env"]}
    return frozenset(names)


@cache
def trainer_strings() -> frozenset[str]:
    """Every string constant of the trainer package: a variable it reads is one
    (`environ.get("RANK")`, an Option's env name). gpu_check is left out: it clears the
    contract's variables for its runs, it does not read them."""
    found = set()
    for path in TRAINER.rglob("*.py"):
        if "gpu_check" in path.relative_to(TRAINER).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return frozenset(found)


def torch_source(relative: str) -> str:
    # torch is a core dependency (make venv installs it): its absence is a broken venv.
    spec = importlib.util.find_spec("torch")
    assert spec is not None, "torch is not installed"
    assert spec.submodule_search_locations, "torch is not a package here"
    return (Path(spec.submodule_search_locations[0]) / relative).read_text()


def torchrun_variables() -> set[str]:
    flags = re.findall(r'"--([a-z][a-z0-9_-]*)"', torch_source(TORCHRUN))
    return {"PET_" + flag.replace("-", "_").upper() for flag in flags}


def test_the_jobs_cover_every_variable_the_planner_names() -> None:
    # plan/env.py is the one module that names them: each must show up in some pod.
    source = (Path(env.__file__)).read_text()
    named = set(re.findall(r'(?:value|field_ref)\("([A-Z0-9_]+)"', source))
    assert named == planned()


def test_every_planned_variable_has_a_reader() -> None:
    readers = trainer_strings() | TORCH_READS.keys() | OTHER_READS.keys()
    unread = {n for n in planned() - readers if not n.startswith("PET_")}
    assert unread == FOR_USER_SCRIPTS.keys()


def test_the_variables_for_user_scripts_are_set_and_read_by_no_code_of_ours() -> None:
    # The list stays short: a variable our trainer starts reading leaves it.
    assert FOR_USER_SCRIPTS.keys() <= planned()
    assert not FOR_USER_SCRIPTS.keys() & (trainer_strings() | TORCH_READS.keys())


def test_torchrun_reads_every_pet_variable() -> None:
    pet = {n for n in planned() if n.startswith("PET_")}
    assert pet <= torchrun_variables()


@pytest.mark.parametrize(("name", "path"), sorted(TORCH_READS.items()))
def test_torch_reads(name: str, path: str) -> None:
    assert name in planned()
    assert f'"{name}"' in torch_source(path)


def _documented() -> set[str]:
    """Variables in the first column of docs/env-contract.md's tables."""
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", ENV_DOC.read_text(), re.MULTILINE))


def test_env_contract_documents_exactly_the_planned_variables() -> None:
    assert _documented() == planned()


def test_readme_names_only_planned_variables() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### What every pod gets") :]
    section = section[: section.index("\n#")]
    names = set(re.findall(r"`([A-Z][A-Z0-9_]{3,})(?:=[^`]*)?`", section))
    assert names <= planned()


def test_the_trainer_runs_the_api_pipeline_schedules() -> None:
    api = tuple(schedule.value for schedule in PipelineSchedule)
    assert api == config.SCHEDULES
    # dist_pipeline imports torch; its table of schedule classes is read from the source.
    tree = ast.parse((TRAINER / "dist_pipeline.py").read_text())
    (table,) = (
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "SCHEDULES"
        and isinstance(node.value, ast.Dict)
    )
    assert {ast.literal_eval(key) for key in table.keys if key is not None} == set(api)


def test_the_trainer_defaults_are_the_api_defaults() -> None:
    # A trainer started without the variables (mgj run, a bare python -m) pipelines as
    # a job that omits spec.modelParallel does.
    policy = ModelParallelPolicy()
    assert config.TrainConfig().schedule == policy.schedule.value
    assert config.TrainConfig().micro_batches == policy.micro_batches


def test_the_trainer_accepts_every_backend_the_planner_sets() -> None:
    assert {env.backend(0), env.backend(1)} <= set(config.BACKENDS)

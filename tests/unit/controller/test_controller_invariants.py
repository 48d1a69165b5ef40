"""The operator's invariants, and proof that the checks every controller test runs
(support/controller_run.py) catch their breach: a status field the CRD does not declare,
a status written twice in one pass, a write to the cluster from outside the actuator."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

import multigpu_operator
from multigpu_operator.actuator import Actuator
from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.cluster.errors import Invalid
from multigpu_operator.cluster.kinds import JOBS
from multigpu_operator.controller.job_pass import JobPass
from multigpu_operator.policy.inputs import PassInputs
from multigpu_operator.policy.step import Decision, StatusUpdate
from support.controller_run import ddp_spec, running_controller
from support.fake_cluster import FakeCluster
from support.status_reads import reads_in, string_reads

# The Cluster protocol's writes: what only the actuator calls (on a job's objects; the
# election's Lease is written by cluster/leases.py).
WRITES = ("create", "replace", "patch", "delete")
ELECTION = Path("cluster", "leases.py")


async def run_one_job(cluster: FakeCluster) -> None:
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(5)


@pytest.mark.asyncio
@pytest.mark.looptime(end=600)
async def test_the_fake_refuses_a_status_field_the_crd_does_not_declare() -> None:
    cluster = FakeCluster()
    cluster.add_job("train", ddp_spec())
    with pytest.raises(Invalid, match="phse"):
        await cluster.patch(JOBS, "ns", "train", {"status": {"phse": "Running"}}, None, "status")
    assert cluster.status("train") == {}
    await cluster.patch(JOBS, "ns", "train", {"status": {"phase": "Running"}}, None, "status")


@pytest.mark.asyncio
@pytest.mark.looptime(end=600)
async def test_a_misspelt_status_key_fails_a_controller_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    as_api = JobStatus.as_api
    monkeypatch.setattr(JobStatus, "as_api", lambda self: {**as_api(self), "phse": "x"})
    cluster = FakeCluster()
    with pytest.raises(AssertionError, match="status writes refused"):
        await run_one_job(cluster)


@pytest.mark.asyncio
@pytest.mark.looptime(end=600)
async def test_a_status_written_twice_in_one_pass_fails_a_controller_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_status = Actuator.write_status

    async def twice(
        self: Actuator, body: dict[str, Any], inputs: PassInputs, job: Job, decision: Decision
    ) -> bool:
        written = await write_status(self, body, inputs, job, decision)
        again = decision.status.merged(JobStatus(reason="Again"))
        await self.status.write(body, StatusUpdate(again, (), None))
        return written

    monkeypatch.setattr(Actuator, "write_status", twice)
    cluster = FakeCluster()
    with pytest.raises(AssertionError, match="more than once"):
        await run_one_job(cluster)


def _in_module(module: str, source: str) -> Any:
    """The function `source` defines, as if it were code of operator module `module`."""
    scope: dict[str, Any] = {"__name__": module}
    exec(compile(source, f"<{module}>", "exec"), scope)
    return next(v for k, v in scope.items() if not k.startswith("__"))


@pytest.mark.asyncio
@pytest.mark.looptime(end=600)
async def test_a_write_from_outside_the_actuator_fails_a_controller_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A pass deleting a job itself, instead of through a Decision.
    run = _in_module(
        "multigpu_operator.controller.job_pass",
        "async def run(self, key, body, refusal):\n"
        "    from multigpu_operator.cluster.kinds import JOBS\n"
        "    await self.actuator.cluster.delete(JOBS, *key, body['metadata']['uid'])\n",
    )
    monkeypatch.setattr(JobPass, "run", run)
    cluster = FakeCluster()
    with pytest.raises(
        AssertionError, match=r"multigpu_operator\.controller\.job_pass: delete multigpujobs"
    ):
        await run_one_job(cluster)


def test_only_the_actuator_calls_the_clusters_writes() -> None:
    """The same, read from the source: outside actuator/, no operator module calls a
    write verb of the Cluster protocol on a kind (cluster/ only declares them). The
    user's side (client/: `mgj submit`, `delete`, `render --server`) writes the user's
    own jobs through the same verbs, and is no part of the operator."""
    root = Path(multigpu_operator.__file__).parent
    # `.patch(WORKLOADS, ...`, the kind perhaps on the next line.
    call = re.compile(rf"\.({'|'.join(WRITES)})\(\s*(kinds\.)?[A-Z][A-Z_]*\s*[,)]")
    found = [
        f"{path.relative_to(root)}:{text[: match.start()].count(chr(10)) + 1}: {match[0]}"
        for path in sorted(root.rglob("*.py"))
        if not {"actuator", "client"} & set(path.relative_to(root).parts)
        and path.relative_to(root) != ELECTION
        for text in [path.read_text()]
        for match in call.finditer(text)
    ]
    assert found == []


def test_the_source_check_sees_a_write() -> None:
    call = "await self.cluster.delete(\n    JOBS, ns, name, uid\n)"
    assert re.search(rf"\.({'|'.join(WRITES)})\(\s*(kinds\.)?[A-Z][A-Z_]*\s*[,)]", call)


def test_policy_reads_the_status_by_typed_field_only() -> None:
    """The previous status is a JobStatus in every pass: no pure layer reads one of its
    keys by string (a misspelt key would be a silent None)."""
    root = Path(multigpu_operator.__file__).parent
    pure = [*sorted((root / "policy").rglob("*.py")), root / "reconcile.py"]
    assert reads_in(pure, root) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('seen.previous.get("createdAttempt")', ["1: createdAttempt"]),
        ('previous["progress"]["stepsPerSecond"]', ["1: progress", "1: stepsPerSecond"]),
        ('status.get("conditions", [])', ["1: conditions"]),
        ('x = "countedFailures"', ["1: countedFailures"]),
        ('pod.get("status", {}).get("phase")', []),
        ("seen.previous.created_attempt", []),
    ],
)
def test_the_status_read_check_sees_a_read_by_key(source: str, found: list[str]) -> None:
    assert string_reads(source) == found

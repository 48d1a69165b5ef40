"""multigpu_operator.client on the operator's in-memory API server (support/fake_cluster.py,
the user's side in support/client_jobs.py). `mgj`: test_mgj_commands.py. Against a real
API server: tests/integration/."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator.api.status import Phase
from multigpu_operator.client import (
    AsyncClient,
    Client,
    InvalidJob,
    JobEnded,
    JobNotFound,
    WaitTimeout,
)
from multigpu_operator.cluster.errors import Invalid
from multigpu_operator.cluster.kinds import EVENTS, PODS
from support.client_jobs import (
    MANIFEST,
    job_names,
    phases,
    pod,
    put_logs,
    put_pods,
    user_cluster,
)
from support.fake_cluster import FakeCluster


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    return user_cluster(tmp_path, monkeypatch)


def test_the_blocking_client_creates_gets_lists_and_deletes(fake: FakeCluster) -> None:
    jobs = Client(cluster=fake)
    assert jobs.namespace == "team"  # the kubeconfig context's
    assert jobs.create(MANIFEST) == "train"
    put_pods(fake, pod(1, node="node-b"), pod(0))
    older = pod(0, attempt=0)  # of an earlier attempt, by another name: not shown
    fake.put(PODS, {**older, "metadata": {**older["metadata"], "name": "older-0"}})
    phases(fake, ["Running"])
    view = jobs.get("train")
    assert (view.phase, view.status.attempt) == (Phase.RUNNING, 1)
    assert [(p.replica, p.name, p.node, p.state) for p in view.pods] == [
        (0, "train-0", "node-a", "Running"),
        (1, "train-1", "node-b", "Running"),
    ]
    assert [v.name for v in jobs.list()] == ["train"]
    jobs.delete("train")
    assert (fake.calls_of("delete multigpujobs")[0].args, job_names(fake)) == (
        ("team", "train", None),
        set(),
    )
    with pytest.raises(JobNotFound, match="no MultiGPUJob 'train' in namespace 'team'"):
        jobs.get("train")


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(yaml.safe_load(MANIFEST), id="dict"),
        pytest.param(MANIFEST, id="yaml"),
        pytest.param("path", id="path"),
    ],
)
def test_a_job_is_given_as_a_dict_yaml_or_a_path(
    fake: FakeCluster, tmp_path: Path, given: Any
) -> None:
    if given == "path":
        given = tmp_path / "job.yaml"
        given.write_text(MANIFEST)
    assert Client(cluster=fake).create(given) == "train"
    assert fake.jobs["team", "train"]["spec"] == {"replicas": 2}


def test_the_servers_refusal_names_the_field(fake: FakeCluster) -> None:
    refusal = 'MultiGPUJob.multigpu.dev "train" is invalid: spec.replicas: Required'
    fake.fail("create multigpujobs", Invalid(refusal, 422))
    with pytest.raises(InvalidJob, match=r"spec\.replicas: Required"):
        Client(cluster=fake).create(MANIFEST.replace("{replicas: 2}", "{}"))
    with pytest.raises(InvalidJob, match="not a MultiGPUJob"):
        Client(cluster=fake).create({"kind": "Pod"})
    Client(cluster=fake).create(MANIFEST)
    with pytest.raises(InvalidJob, match=r'multigpujobs\.multigpu\.dev "train" already exists'):
        Client(cluster=fake).create(MANIFEST)


@pytest.mark.parametrize(
    ("moves", "for_", "raised"),
    [
        pytest.param(["Pending", "Running", "Succeeded"], Phase.SUCCEEDED, None, id="succeeds"),
        pytest.param(["Pending", "Running"], Phase.RUNNING, None, id="runs"),
        pytest.param(["Running", "Failed"], Phase.SUCCEEDED, JobEnded, id="fails"),
        pytest.param(["Pending"] * 1000, Phase.SUCCEEDED, WaitTimeout, id="times-out"),
    ],
)
def test_wait(
    fake: FakeCluster, moves: list[str], for_: Phase, raised: type[Exception] | None
) -> None:
    jobs = Client(cluster=fake)
    jobs.create(MANIFEST)
    phases(fake, moves)
    seen: list[Phase | None] = []
    if raised is None:
        status = jobs.wait("train", for_, timeout=5, on_status=lambda s: seen.append(s.phase))
        assert status.phase == for_
        assert seen == [Phase(p) for p in moves]
    else:
        with pytest.raises(raised):
            jobs.wait("train", for_, timeout=0.2)


def test_the_async_client_and_logs_of_one_replica(fake: FakeCluster) -> None:
    put_pods(fake, pod(0), pod(1))
    put_logs(fake, {"train-0": ["zero"], "train-1": ["one", "two"]})

    async def use() -> list[str]:
        async with AsyncClient(namespace="team", cluster=fake) as jobs:
            await jobs.create(yaml.safe_load(MANIFEST))
            return [line async for line in jobs.logs("train")]

    assert asyncio.run(use()) == ["[train-0 r0] zero", "[train-1 r1] one", "[train-1 r1] two"]
    lines = Client(cluster=fake).logs("train", replica=1)
    assert list(lines) == ["[train-1 r1] one", "[train-1 r1] two"]


def test_events_oldest_first_of_the_job_only(fake: FakeCluster) -> None:
    for name, at in (("b", "2026-11-22T10:00:02.000000Z"), ("a", "2026-11-22T10:00:01.000000Z")):
        regarding = {"kind": "MultiGPUJob", "name": "train"}
        meta = {"name": name, "namespace": "team"}
        fake.put(EVENTS, {"metadata": meta, "regarding": regarding, "eventTime": at})
    other = {"kind": "Pod", "name": "train"}
    fake.put(EVENTS, {"metadata": {"name": "c", "namespace": "team"}, "regarding": other})
    assert [e["metadata"]["name"] for e in Client(cluster=fake).events("train")] == ["a", "b"]

"""multigpu_operator.client against an HTTP server in the test that answers as the API
server would (support/client_api.py). `mgj`: test_mgj_commands.py. Against a real API
server: tests/integration/."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
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
    kubeconfig_login,
)
from support.client_api import MANIFEST, ApiServer, pod, served


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    with served(tmp_path, monkeypatch) as server:
        yield server


def test_the_blocking_client_creates_gets_lists_and_deletes(api: ApiServer) -> None:
    jobs = Client()
    assert jobs.namespace == "team"  # the kubeconfig context's
    assert jobs.create(MANIFEST) == "train"
    api.pods = [pod(1, node="node-b"), pod(0), pod(0, attempt=0)]
    api.phases = ["Running"]
    view = jobs.get("train")
    assert (view.phase, view.status.attempt) == (Phase.RUNNING, 1)
    assert [(p.replica, p.name, p.node, p.state) for p in view.pods] == [
        (0, "train-0", "node-a", "Running"),
        (1, "train-1", "node-b", "Running"),
    ]
    assert [v.name for v in jobs.list()] == ["train"]
    jobs.delete("train")
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
    api: ApiServer, tmp_path: Path, given: Any
) -> None:
    if given == "path":
        given = tmp_path / "job.yaml"
        given.write_text(MANIFEST)
    assert Client().create(given) == "train"
    assert api.jobs["train"]["spec"] == {"replicas": 2}


def test_the_servers_refusal_names_the_field(api: ApiServer) -> None:
    with pytest.raises(InvalidJob, match=r"spec\.replicas: Required"):
        Client().create(MANIFEST.replace("{replicas: 2}", "{}"))
    with pytest.raises(InvalidJob, match="not a MultiGPUJob"):
        Client().create({"kind": "Pod"})


@pytest.mark.parametrize(
    ("phases", "for_", "raised"),
    [
        pytest.param(["Pending", "Running", "Succeeded"], Phase.SUCCEEDED, None, id="succeeds"),
        pytest.param(["Pending", "Running"], Phase.RUNNING, None, id="runs"),
        pytest.param(["Running", "Failed"], Phase.SUCCEEDED, JobEnded, id="fails"),
        pytest.param(["Pending"] * 1000, Phase.SUCCEEDED, WaitTimeout, id="times-out"),
    ],
)
def test_wait(
    api: ApiServer, phases: list[str], for_: Phase, raised: type[Exception] | None
) -> None:
    jobs = Client()
    jobs.create(MANIFEST)
    api.phases = list(phases)
    seen: list[Phase | None] = []
    if raised is None:
        status = jobs.wait("train", for_, timeout=5, on_status=lambda s: seen.append(s.phase))
        assert status.phase == for_
        assert seen == [Phase(p) for p in phases]
    else:
        with pytest.raises(raised):
            jobs.wait("train", for_, timeout=0.2)


def test_the_async_client_and_logs_of_one_replica(api: ApiServer) -> None:
    api.pods = [pod(0), pod(1)]
    api.logs = {"train-0": ["zero"], "train-1": ["one", "two"]}

    async def use() -> list[str]:
        async with AsyncClient(namespace="team", login=kubeconfig_login()) as jobs:
            await jobs.create(yaml.safe_load(MANIFEST))
            return [line async for line in jobs.logs("train")]

    assert asyncio.run(use()) == ["[train-0 r0] zero", "[train-1 r1] one", "[train-1 r1] two"]
    assert list(Client().logs("train", replica=1)) == ["[train-1 r1] one", "[train-1 r1] two"]

"""`mgj logs`' requests (client/pod_logs.py) on the operator's in-memory API server
(support/fake_cluster.py): the job, its pods by label selector, and each pod's log,
followed as a stream. Against a real API server: tests/integration/."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest

from multigpu_operator.client import pod_logs
from multigpu_operator.client.log_pods import LogRequest, LogsError
from multigpu_operator.cluster.errors import Invalid
from multigpu_operator.cluster.kinds import JOBS, Kind
from support.client_jobs import pod, put_job, put_logs, put_pods, set_status
from support.fake_cluster import FakeCluster

pytestmark = pytest.mark.asyncio

NOT_STARTED = 'container "trainer" in pod "train-1" is waiting to start: ContainerCreating'


class Streams(FakeCluster):
    """The in-memory API server, with a step of the test run as a pod's log stream opens,
    after the log as it then is was taken and before its lines are sent."""

    def __init__(self) -> None:
        super().__init__()
        self.on_stream: dict[str, Callable[[], Awaitable[None]]] = {}

    async def stream(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        subresource: str,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        lines = [line async for line in super().stream(kind, namespace, name, subresource, params)]
        if name in self.on_stream:
            await self.on_stream[name]()
        for line in lines:
            yield line


def log_queries(fake: FakeCluster) -> list[dict[str, str]]:
    return [call.args[2] for call in fake.calls_of("get pods/log")]


async def test_the_logs_of_the_latest_attempt_by_replica_index(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = FakeCluster()
    put_job(fake, status={"phase": "Running"})
    put_pods(fake, pod(2, 2), pod(1, 2), pod(0, 2, containers=("sidecar", "trainer")), pod(3, 2))
    put_logs(fake, {"train-0": ["a", "b"], "train-1": ["c"], "train-2": []})  # train-3: none yet
    out = io.StringIO()
    await pod_logs.read_logs(fake, LogRequest("train", "team", tail=10), out)
    assert out.getvalue() == "[train-0 r0] a\n[train-0 r0] b\n[train-1 r1] c\n"
    assert '[train-3 r3] no log: container "trainer" in pod "train-3" is waiting' in (
        capsys.readouterr().err
    )
    assert [(c.method, c.args) for c in fake.calls[:3]] == [
        ("get multigpujobs", ("team", "train")),
        ("list pods", ("team", "multigpu.dev/job-name=train", None)),
        ("get pods/log", ("team", "train-0", {"container": "trainer", "tailLines": "10"})),
    ]


@pytest.mark.parametrize(
    ("job", "pods", "message"),
    [
        pytest.param(None, [], "no MultiGPUJob 'train' in namespace 'team'", id="no-job"),
        pytest.param(
            {"phase": "Failed"},
            [],
            "MultiGPUJob 'train' in namespace 'team' has no pods",
            id="ended-without-pods",
        ),
        pytest.param({}, [pod(0, 1)], "has no pods of attempt 2; it has pods of attempt 1", id="n"),
    ],
)
@pytest.mark.parametrize("follow", [False, True])
async def test_nothing_to_show_is_an_error(
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    message: str,
    follow: bool,
) -> None:
    fake = FakeCluster()
    if job is not None:
        put_job(fake, status=job)
    put_pods(fake, *pods)
    read = pod_logs.follow_logs if follow else pod_logs.read_logs
    with pytest.raises(LogsError, match=message):
        await read(fake, LogRequest("train", "team", attempt=2 if pods else None), io.StringIO())


async def test_following_two_pods_at_once_and_the_next_attempt_until_the_job_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = Streams()
    monkeypatch.setattr(pod_logs, "RETRY_S", 0.01)
    put_job(fake, status={"phase": "Running"})
    put_pods(fake, pod(1, 1), pod(0, 1))
    put_logs(fake, {"train-0": ["step 1", "lost"], "train-1": ["step 1", "step 2"]})
    # Still pulling its image when first asked.
    fake.fail("get pods/log", Invalid(NOT_STARTED, 400), name="train-1")
    both_streaming = asyncio.Event()

    async def first_stream_waits_for_the_second() -> None:
        # Read one pod after the other, train-0's log would never come.
        await asyncio.wait_for(both_streaming.wait(), 5)

    async def second_stream_starts_a_retry() -> None:
        both_streaming.set()
        # The job is retried: attempt 2's pods under the same names; then it succeeds.
        put_pods(fake, pod(0, 2), pod(1, 2))
        put_logs(fake, {"train-0": ["resumed at step 1"], "train-1": ["resumed at step 1"]})
        fake.on_stream = {}
        set_status(fake, "train", {"phase": "Succeeded"})

    fake.on_stream = {
        "train-0": first_stream_waits_for_the_second,
        "train-1": second_stream_starts_a_retry,
    }
    out = io.StringIO()
    await asyncio.wait_for(pod_logs.follow_logs(fake, LogRequest("train", "team"), out, 0.02), 10)
    lines = out.getvalue().splitlines()
    assert sorted(lines) == sorted(
        [
            "[train-0 r0] step 1",
            "[train-0 r0] lost",
            "[train-1 r1] step 1",
            "[train-1 r1] step 2",
            "[train-0 r0] resumed at step 1",
            "[train-1 r1] resumed at step 1",
        ]
    )
    for name in ("train-0 r0", "train-1 r1"):
        own = [line for line in lines if line.startswith(f"[{name}]")]
        assert own[-1] == f"[{name}] resumed at step 1"
    follows = log_queries(fake)
    assert follows[0] == {"container": "trainer", "follow": "true"}
    assert len(follows) == 5  # two pods, train-1 twice, then attempt 2's two pods


async def test_following_a_fixed_attempt_ignores_later_pods() -> None:
    fake = FakeCluster()
    put_job(fake, status={"phase": "Failed"})
    older = pod(0, 1)
    put_pods(fake, {**older, "metadata": {**older["metadata"], "name": "train-0-of-1"}}, pod(0, 2))
    put_logs(fake, {"train-0": ["x"], "train-0-of-1": ["y"]})
    out = io.StringIO()
    await pod_logs.follow_logs(fake, LogRequest("train", "team", attempt=2), out, 0.02)
    assert out.getvalue() == "[train-0 r0] x\n"


async def test_following_a_job_before_its_pods_exist_waits_for_them() -> None:
    fake = FakeCluster()
    put_job(fake, status={"phase": "Pending"})
    phases: list[str] = []

    def on_job(job: Mapping[str, Any]) -> None:
        phases.append(job["status"]["phase"])
        if len(phases) == 2:  # the operator has created the pods, which ran and ended
            put_pods(fake, pod(0, 1))
            put_logs(fake, {"train-0": ["done"]})
            set_status(fake, "train", {"phase": "Succeeded"})

    out = io.StringIO()
    follow = pod_logs.follow_logs(fake, LogRequest("train", "team"), out, 0.01, on_job=on_job)
    await asyncio.wait_for(follow, 10)
    assert out.getvalue() == "[train-0 r0] done\n"
    assert phases == ["Pending", "Pending", "Succeeded"]


async def test_a_job_gone_while_followed_ends_the_following() -> None:
    fake = FakeCluster()
    put_job(fake, status={"phase": "Running"})
    put_pods(fake, pod(0, 1))
    put_logs(fake, {"train-0": ["step 1"]})
    fake.before("get multigpujobs", lambda: None, lambda: fake.remove(JOBS, "train", "team"))
    out = io.StringIO()
    await asyncio.wait_for(pod_logs.follow_logs(fake, LogRequest("train", "team"), out, 0.01), 10)
    assert out.getvalue() == "[train-0 r0] step 1\n"

"""`mgj render --server`'s request (cluster/job_dry_run.py): a strict, dry-run create of
each job, the stored object or the server's own words back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from multigpu_operator.cluster import job_dry_run
from multigpu_operator.cluster.errors import ClusterError, Forbidden, Invalid, Unreachable

pytestmark = pytest.mark.asyncio

JOB = {"apiVersion": "multigpu.dev/v1alpha1", "kind": "MultiGPUJob", "metadata": {"name": "j"}}


class FakeRest:
    def __init__(self, answer: bytes | ClusterError) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str, Mapping[str, str] | None]] = []

    async def call(
        self, method: str, path: str, params: Mapping[str, str] | None, body: Any
    ) -> bytes:
        self.calls.append((method, path, params))
        if isinstance(self.answer, ClusterError):
            raise self.answer
        return self.answer


async def test_an_accepted_job_comes_back_as_the_server_would_store_it() -> None:
    stored = {**JOB, "spec": {"masterPort": 29500}}
    rest = FakeRest(orjson.dumps(stored))
    assert await job_dry_run._dry_run(rest, JOB, "team") == stored  # type: ignore[arg-type]
    assert rest.calls == [
        (
            "POST",
            "/apis/multigpu.dev/v1alpha1/namespaces/team/multigpujobs",
            {"dryRun": "All", "fieldValidation": "Strict"},
        )
    ]


@pytest.mark.parametrize(
    "refusal",
    [
        Invalid('MultiGPUJob.multigpu.dev "j" is invalid: spec.mode: Required value', 422),
        Invalid('strict decoding error: unknown field "spec.foo"', 400),
        Forbidden('multigpujobs.multigpu.dev "j" is forbidden: exceeded quota', 403),
    ],
)
async def test_a_refusal_is_the_servers_words(refusal: ClusterError) -> None:
    assert await job_dry_run._dry_run(FakeRest(refusal), JOB, "team") == refusal.message  # type: ignore[arg-type]


async def test_an_unreachable_server_is_an_error() -> None:
    with pytest.raises(Unreachable):
        await job_dry_run._dry_run(FakeRest(Unreachable("refused")), JOB, "team")  # type: ignore[arg-type]

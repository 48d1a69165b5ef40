"""`mgj render --server`'s request (client/dry_run.py): a strict, dry-run create of each
job on the Cluster verbs, the stored object or the server's own words back; on the
operator's in-memory API server (support/fake_cluster.py). That the create is strict
and a dry run on the wire: test_cluster_verbs.py."""

from __future__ import annotations

import pytest

from multigpu_operator.client.dry_run import dry_run_jobs
from multigpu_operator.cluster.errors import ClusterError, Forbidden, Invalid, Unreachable
from support.fake_cluster import FakeCluster

pytestmark = pytest.mark.asyncio

JOB = {"apiVersion": "multigpu.dev/v1alpha1", "kind": "MultiGPUJob", "metadata": {"name": "j"}}


async def test_an_accepted_job_comes_back_as_the_server_would_store_it() -> None:
    fake = FakeCluster()
    other = {**JOB, "metadata": {"name": "k", "namespace": "theirs"}}
    assert await dry_run_jobs(fake, [JOB, other], "team") == [JOB, other]
    assert [c.args for c in fake.calls_of("dry-run multigpujobs")] == [
        ("team", "j"),
        ("theirs", "k"),
    ]
    assert fake.jobs == {}  # nothing stored


@pytest.mark.parametrize(
    "refusal",
    [
        Invalid('MultiGPUJob.multigpu.dev "j" is invalid: spec.mode: Required value', 422),
        Invalid('strict decoding error: unknown field "spec.foo"', 400),
        Forbidden('multigpujobs.multigpu.dev "j" is forbidden: exceeded quota', 403),
    ],
)
async def test_a_refusal_is_the_servers_words(refusal: ClusterError) -> None:
    fake = FakeCluster()
    fake.fail("dry-run multigpujobs", refusal)
    assert await dry_run_jobs(fake, [JOB], "team") == [refusal.message]


async def test_an_existing_namesake_is_the_servers_already_exists() -> None:
    fake = FakeCluster()

    async def already_exists(*_: object, **__: object) -> None:
        return None  # Kube.create's answer to the server's AlreadyExists (409)

    fake.create = already_exists  # type: ignore[method-assign]
    answer = await dry_run_jobs(fake, [JOB], "team")
    assert answer == ['multigpujobs.multigpu.dev "j" already exists']


async def test_an_unreachable_server_is_an_error() -> None:
    fake = FakeCluster()
    fake.fail("dry-run multigpujobs", Unreachable("refused"))
    with pytest.raises(Unreachable):
        await dry_run_jobs(fake, [JOB], "team")

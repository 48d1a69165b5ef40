"""The controller against an in-memory cluster (support/fake_cluster.py) on looptime's
fake loop clock: what it writes and in which order, how it retries, when it wakes up.
The same behaviour on a real API server: tests/integration/test_operator_e2e.py and
test_lifecycle_*.py."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from prometheus_client import REGISTRY

from multigpu_operator.cluster.errors import ClusterError, Conflict, Invalid
from multigpu_operator.cluster.kinds import JOBS
from support.controller_run import T0, ddp_spec, running_controller
from support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=3600)]

KEY = ("ns", "train")
REJECTED = 'Pod "train-0" is invalid: spec.containers[0].image: Required value'


# The informers' calls: they read, and run beside the reconciles.
WATCHES = (
    "list pods",
    "watch pods",
    "list nodes",
    "watch nodes",
    "list services",
    "watch services",
    "list clustermultigpuruntimes",
    "watch clustermultigpuruntimes",
    "list multigpuruntimes",
    "watch multigpuruntimes",
)


def methods(cluster: FakeCluster) -> list[str]:
    """The calls that change something, in order (the informers' are left out)."""
    return [c.method for c in cluster.calls if c.method not in WATCHES]


def gaps(times: list[float]) -> list[float]:
    return [round(later - earlier, 3) for earlier, later in itertools.pairwise(times)]


async def test_a_new_job_gets_its_children_then_its_status_then_its_events() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(replicas=2))
        await asyncio.sleep(1)
    assert cluster.pod_names() == {"train-0", "train-1"}
    assert set(cluster.services) == {KEY}
    status = cluster.status("train")
    assert (status["phase"], status["attempt"], status["createdAttempt"]) == ("Pending", 1, 1)
    calls = methods(cluster)
    # Attempt 1 is what an empty status means: the first write waits for the pods and
    # says Created at once (one write fewer); events follow the write.
    assert sorted(calls[:3]) == ["create pods", "create pods", "create services"]
    assert calls[3:] == ["patch multigpujobs/status", "create events"]
    assert [e.reason for e in cluster.events] == ["PodsCreated"]


async def test_a_new_attempt_is_written_before_its_pods() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(runPolicy={"backoffLimit": 1}))
        await asyncio.sleep(1)
        before = len(cluster.calls)
        cluster.set_phase("train-0", "Failed", exit_code=1)
        await asyncio.sleep(5)
    assert cluster.status("train")["attempt"] == 2
    # Once the status says attempt 2, a crash cannot make it 1 again: the counters are
    # written before any pod of the attempt exists.
    later = [
        c.method
        for c in cluster.calls[before:]
        if c.method in ("patch multigpujobs/status", "create pods")
    ]
    assert later[0] == "patch multigpujobs/status"
    assert "create pods" in later


async def test_a_status_conflict_is_retried_and_its_events_wait_for_the_write() -> None:
    cluster = FakeCluster()
    cluster.fail("patch multigpujobs/status", Conflict("the object has been modified", 409))
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        # The lost write posted nothing: events follow a written status only.
        assert cluster.events == []
        await asyncio.sleep(1)
    writes = [w.at for w in cluster.calls_of("patch multigpujobs/status")]
    assert gaps(writes)[0] == 1.5  # CONFLICT_RETRY_SECONDS, and half a second late
    assert cluster.pod_names() == {"train-0", "train-1"}
    assert [e.reason for e in cluster.events] == ["PodsCreated"]


async def test_a_pod_rejected_by_the_server_fails_the_job_with_its_message() -> None:
    cluster = FakeCluster()
    # Only these two creates are rejected: a pass that started from a status older than
    # the Failed one written would create the pods.
    cluster.fail("create pods", Invalid(REJECTED, 422), times=2)
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(120)
    failed = cluster.condition("train", "Failed")
    assert cluster.status("train")["phase"] == "Failed"
    assert (failed["reason"], failed["message"]) == ("InvalidPodTemplate", REJECTED)
    assert ("Warning", "InvalidPodTemplate", REJECTED) in {
        (e.type, e.reason, e.message) for e in cluster.events
    }
    assert len(cluster.calls_of("create pods")) == 2  # a failed job is not retried


async def test_a_failing_pass_backs_off_exponentially_to_the_cap_then_resets() -> None:
    cluster = FakeCluster()
    outage = ClusterError("etcdserver: request timed out", 500)
    cluster.fail("patch multigpujobs/status", outage, times=5)
    async with running_controller(cluster, retry_base_seconds=2, retry_max_seconds=10):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(60)
        writes = [w.at for w in cluster.calls_of("patch multigpujobs/status")]
        assert gaps(writes)[:5] == [2, 4, 8, 10, 10]
        assert [e.reason for e in cluster.events] == ["PodsCreated"]  # only after the write
        # A successful pass reset the backoff: the next outage starts again at the base.
        cluster.fail("patch multigpujobs/status", outage, times=2)
        cluster.set_phase("train-0", "Running")
        cluster.set_phase("train-1", "Running")
        await asyncio.sleep(60)
    later = [w.at for w in cluster.calls_of("patch multigpujobs/status")][len(writes) :]
    assert gaps(later)[:2] == [2, 4]
    assert cluster.status("train")["phase"] == "Running"


async def test_a_deadline_wakes_the_job_when_it_is_due() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec(runPolicy={"activeDeadlineSeconds": 30}))
        await asyncio.sleep(1)
        cluster.set_phase("train-0", "Running")
        cluster.set_phase("train-1", "Running")
        await asyncio.sleep(28)
        assert cluster.status("train")["phase"] == "Running"
        await asyncio.sleep(2)
    assert cluster.condition("train", "Failed")["reason"] == "DeadlineExceeded"
    assert cluster.pod_names() == set()


async def test_a_finished_job_is_deleted_after_its_ttl_and_its_timer_goes_with_it() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec(runPolicy={"ttlSecondsAfterFinished": 60}))
        await asyncio.sleep(1)
        for name in ("train-0", "train-1"):
            cluster.set_phase(name, "Succeeded", exit_code=0)
        await asyncio.sleep(1)
        assert cluster.status("train")["phase"] == "Succeeded"
        assert controller.queue.due(KEY) is not None
        await asyncio.sleep(60)
        assert cluster.jobs == {}
        assert controller.queue.due(KEY) is None
        assert KEY not in controller.jobs
    assert len(cluster.calls_of("delete multigpujobs")) == 1


async def test_deleting_a_job_cancels_its_timer() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec(runPolicy={"activeDeadlineSeconds": 30}))
        await asyncio.sleep(1)
        assert controller.queue.due(KEY) is not None
        await cluster.delete(JOBS, "ns", "train", cluster.jobs[KEY]["metadata"]["uid"])
        await asyncio.sleep(1)
        assert controller.queue.due(KEY) is None
        before = methods(cluster)
        await asyncio.sleep(60)
        assert methods(cluster) == before  # no pass at the deadline


def last_pass(key: tuple[str, str] = KEY) -> float | None:
    labels = {"namespace": key[0], "job": key[1]}
    return REGISTRY.get_sample_value("mgj_job_last_reconcile_timestamp_seconds", labels)


async def test_a_job_shows_when_its_last_pass_began_until_it_is_deleted() -> None:
    # What a test waits for to know the operator has looked at a job since a change.
    cluster = FakeCluster()
    async with running_controller(cluster):
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        first = last_pass()
        assert first is not None
        assert T0.timestamp() <= first < T0.timestamp() + 1
        await asyncio.sleep(10)
        cluster.set_phase("train-0", "Running")  # a pass, 11 s after the first
        await asyncio.sleep(1)
        assert last_pass() == pytest.approx(first + 11, abs=0.5)
        assert REGISTRY.get_sample_value("mgj_active_workers") == 0
        await cluster.delete(JOBS, "ns", "train", cluster.jobs[KEY]["metadata"]["uid"])
        await asyncio.sleep(1)
        assert last_pass() is None


async def test_changes_during_a_pass_make_exactly_one_more_pass() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(1)
        cluster.set_phase("train-0", "Running")
        cluster.set_phase("train-1", "Running")
        await asyncio.sleep(1)  # settled: a pass now changes nothing
        passes: list[float] = []
        reconcile = controller.reconcile

        async def slow(key: tuple[str, str]) -> None:
            passes.append(asyncio.get_running_loop().time())
            await asyncio.sleep(1)  # a pass that takes a second
            await reconcile(key)

        controller.reconcile = slow  # type: ignore[method-assign]
        controller.enqueue(KEY)
        await asyncio.sleep(0.5)
        for _ in range(5):
            controller.enqueue(KEY)
        await asyncio.sleep(30)
    assert gaps(passes) == [1]  # the running pass, then one for all five


async def test_the_pod_cache_follows_the_cluster_across_watch_timeouts_and_expiry() -> None:
    cluster = FakeCluster()
    async with running_controller(cluster) as controller:
        cluster.add_job("train", ddp_spec())
        await asyncio.sleep(400)  # past the server's 300 s watch timeout: watched again
        cluster.set_phase("train-0", "Running")
        cluster.expire_watches()  # 410 Gone: listed again
        cluster.set_phase("train-1", "Running")
        await asyncio.sleep(1)
        cached = {
            p["metadata"]["name"]: p["status"]["phase"] for p in controller.informer.pods_of(KEY)
        }
    assert cached == {"train-0": "Running", "train-1": "Running"}
    assert cluster.status("train")["phase"] == "Running"
    assert (len(cluster.calls_of("list pods")), len(cluster.calls_of("watch pods"))) == (2, 3)

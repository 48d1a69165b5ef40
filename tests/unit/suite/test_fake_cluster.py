"""The in-memory API server the controller, client and `mgj` tests run on
(support/fake_cluster.py) answers as the real one does, for any kind: what those tests
rely on, and the election's Lease store (cluster/leases.py) over the same verbs."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from multigpu_operator.cluster.errors import Conflict, Invalid, NotFound
from multigpu_operator.cluster.kinds import EVENTS, JOBS, PODS, SERVICES, Kind
from multigpu_operator.cluster.leases import Leases
from multigpu_operator.election.lease_rules import LeaseRecord
from support.controller_run import ddp_spec
from support.fake_cluster import FakeCluster

pytestmark = [pytest.mark.asyncio, pytest.mark.looptime(end=60)]

CONFIGMAPS = Kind("", "v1", "configmaps")  # a kind the operator does not use: served all the same


async def test_a_write_takes_a_new_version_and_a_stale_precondition_conflicts() -> None:
    cluster = FakeCluster()
    created = await cluster.create(CONFIGMAPS, "ns", {"metadata": {"name": "c"}})
    assert created is not None
    version = created["metadata"]["resourceVersion"]
    assert await cluster.create(CONFIGMAPS, "ns", {"metadata": {"name": "c"}}) is None
    patched = await cluster.patch(CONFIGMAPS, "ns", "c", {"data": {"a": "1"}}, version)
    assert int(patched["metadata"]["resourceVersion"]) > int(version)
    with pytest.raises(Conflict):
        await cluster.patch(CONFIGMAPS, "ns", "c", {"data": {"a": "2"}}, version)
    with pytest.raises(NotFound):
        await cluster.get(CONFIGMAPS, "ns", "other")
    assert (await cluster.get(CONFIGMAPS, "ns", "c"))["data"] == {"a": "1"}


async def test_a_uid_precondition_spares_a_namesake_and_garbage_collection_follows() -> None:
    cluster = FakeCluster()
    cluster.add_job("train", ddp_spec())
    uid = cluster.jobs["ns", "train"]["metadata"]["uid"]
    owned = {"name": "train-0", "ownerReferences": [{"uid": uid, "controller": True}]}
    await cluster.create(PODS, "ns", {"metadata": owned})
    await cluster.create(SERVICES, "ns", {"metadata": {**owned, "name": "train"}})
    await cluster.delete(JOBS, "ns", "train", "another-uid")
    assert ("ns", "train") in cluster.jobs
    await cluster.delete(JOBS, "ns", "train", uid)
    assert (cluster.jobs, cluster.pods, cluster.services) == ({}, {}, {})


async def test_lists_and_watches_select_by_namespace_and_labels() -> None:
    cluster = FakeCluster()
    _, version = await cluster.list(CONFIGMAPS)
    for ns, name, labels in [("a", "x", {"app": "x"}), ("a", "y", {}), ("b", "x", {"app": "x"})]:
        await cluster.create(CONFIGMAPS, ns, {"metadata": {"name": name, "labels": labels}})
    items, _ = await cluster.list(CONFIGMAPS, "a", "app=x")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [("a", "x")]
    seen = [
        event["object"]["metadata"]["namespace"]
        async for event in cluster.watch(CONFIGMAPS, version, None, "app", timeout_seconds=1)
    ]
    assert seen == ["a", "b"]


async def test_a_planned_fault_is_raised_by_its_verb_and_resource_only() -> None:
    cluster = FakeCluster()
    cluster.fail("create configmaps", Conflict("planned", 409))
    with pytest.raises(Conflict, match="planned"):
        await cluster.create(CONFIGMAPS, "ns", {"metadata": {"name": "c"}})
    assert await cluster.create(PODS, "ns", {"metadata": {"name": "p"}}) is not None
    assert [c.method for c in cluster.calls] == ["create configmaps", "create pods"]


async def test_the_elections_lease_is_created_once_and_replaced_at_the_version_read() -> None:
    leases = Leases(FakeCluster(), "ns", "operator")
    assert await leases.read() == (None, None)
    now = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)
    record = LeaseRecord("a", 15, now, now, 0)
    version = await leases.write(record, None)
    with pytest.raises(Conflict):
        await leases.write(record, None)  # another replica created it first
    assert await leases.read() == (record, version)
    taken = replace(record, holder="b", transitions=1)
    await leases.write(taken, version)
    with pytest.raises(Conflict):
        await leases.write(record, version)  # written since that version was read
    assert (await leases.read())[0] == taken


async def test_a_field_selector_selects_by_nested_fields() -> None:
    cluster = FakeCluster()
    for name, about in (("e1", "train"), ("e2", "other")):
        regarding = {"kind": "MultiGPUJob", "name": about}
        cluster.put(EVENTS, {"metadata": {"name": name, "namespace": "ns"}, "regarding": regarding})
    fields = "regarding.name=train,regarding.kind=MultiGPUJob"
    events, _ = await cluster.list(EVENTS, "ns", fields=fields)
    assert [e["metadata"]["name"] for e in events] == ["e1"]
    assert (await cluster.list(EVENTS, "other", fields=fields))[0] == []


async def test_a_pods_log_whole_tailed_or_streamed_and_a_400_before_it_starts() -> None:
    cluster = FakeCluster()
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}}
    cluster.put(PODS, pod)
    with pytest.raises(Invalid, match='container "c" in pod "p" is waiting to start') as err:
        await cluster.read(PODS, "ns", "p", "log", {"container": "c"})
    assert err.value.status == 400
    cluster.logs["ns", "p"] = ["one", "two", "three"]
    assert await cluster.read(PODS, "ns", "p", "log", {"container": "c"}) == "one\ntwo\nthree\n"
    assert await cluster.read(PODS, "ns", "p", "log", {"tailLines": "2"}) == "two\nthree\n"
    assert [line async for line in cluster.stream(PODS, "ns", "p", "log")] == [
        "one",
        "two",
        "three",
    ]
    with pytest.raises(Invalid, match="container x is not valid for pod p"):
        await cluster.read(PODS, "ns", "p", "log", {"container": "x"})
    with pytest.raises(NotFound):
        await cluster.read(PODS, "ns", "q", "log")
    assert [c.method for c in cluster.calls] == ["get pods/log"] * 6


async def test_a_finalizer_holds_a_deleted_object_until_it_is_released() -> None:
    cluster = FakeCluster()
    meta = {"name": "c", "namespace": "ns", "finalizers": ["example.com/hold"]}
    cluster.put(CONFIGMAPS, {"metadata": meta})
    await cluster.delete(CONFIGMAPS, "ns", "c")
    held = await cluster.get(CONFIGMAPS, "ns", "c")
    assert held["metadata"]["deletionTimestamp"]
    cluster.release(CONFIGMAPS, "c")
    with pytest.raises(NotFound):
        await cluster.get(CONFIGMAPS, "ns", "c")


async def test_steps_before_calls_and_failures_of_one_object() -> None:
    cluster = FakeCluster()
    for name in ("a", "b"):
        cluster.put(CONFIGMAPS, {"metadata": {"name": name, "namespace": "ns"}})
    seen: list[str] = []
    cluster.before("get configmaps", lambda: seen.append("first"), lambda: seen.append("second"))
    cluster.fail("get configmaps", Invalid("no", 400), name="b")
    await cluster.get(CONFIGMAPS, "ns", "a")  # the failure waits for b
    with pytest.raises(Invalid):
        await cluster.get(CONFIGMAPS, "ns", "b")
    await cluster.get(CONFIGMAPS, "ns", "b")
    assert seen == ["first", "second"]

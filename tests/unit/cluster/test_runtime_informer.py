"""The runtimes' cache (cluster/runtimes.py): which jobs a runtime wakes, what a list or
an event changes, and when a job may be told its runtime does not exist."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.cluster.errors import ClusterError
from multigpu_operator.cluster.runtimes import (
    RuntimeInformer,
    RuntimeKey,
    names_runtime,
    trim_runtime,
)
from support.fake_cluster import FakeCluster

CLUSTER = "ClusterMultiGPURuntime"
NAMESPACED = "MultiGPURuntime"


def job(namespace: str = "ns", **ref: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": namespace}, "spec": {"runtimeRef": ref}}


@pytest.mark.parametrize(
    ("body", "runtime", "wakes"),
    [
        (job(name="a"), (CLUSTER, "", "a"), True),  # kind defaults to the cluster's
        (job(name="a"), (CLUSTER, "", "b"), False),
        (job(name="a", kind=NAMESPACED), (CLUSTER, "", "a"), False),
        (job(name="a", kind=NAMESPACED), (NAMESPACED, "ns", "a"), True),
        (job(name="a", kind=NAMESPACED), (NAMESPACED, "other", "a"), False),
        ({"metadata": {"name": "j", "namespace": "ns"}, "spec": {}}, (CLUSTER, "", "a"), False),
    ],
)
def test_a_runtime_wakes_the_jobs_that_name_it(
    body: dict[str, Any], runtime: RuntimeKey, wakes: bool
) -> None:
    assert names_runtime(body, runtime) is wakes


def test_a_runtime_is_kept_trimmed() -> None:
    meta = {"name": "a", "generation": 2, "managedFields": [{}], "annotations": {"x": "y"}}
    assert trim_runtime({"metadata": meta, "spec": {"mode": "Elastic"}}) == {
        "metadata": {"name": "a", "generation": 2},
        "spec": {"mode": "Elastic"},
    }


def test_lists_and_events_tell_what_changed() -> None:
    changed: list[RuntimeKey] = []
    informer = RuntimeInformer(FakeCluster(), changed.append, None)
    store = informer.cluster
    a = {"metadata": {"name": "a", "generation": 1}, "spec": {}}
    store.replace([a])
    assert changed == [(CLUSTER, "", "a")]
    assert informer.get(CLUSTER, "any", "a") == a
    store.replace([a])  # a relist that changes nothing wakes nobody
    assert len(changed) == 1
    store.apply("MODIFIED", a)
    assert len(changed) == 1
    store.apply("DELETED", a)
    assert informer.get(CLUSTER, "ns", "a") is None
    assert changed[-1] == (CLUSTER, "", "a")
    ours = {"metadata": {"name": "b", "namespace": "ns"}, "spec": {}}
    informer.namespaced.apply("ADDED", ours)
    assert informer.get(NAMESPACED, "ns", "b") == ours
    assert informer.get(NAMESPACED, "other", "b") is None


@pytest.mark.parametrize(("status", "listed"), [(404, True), (403, True), (429, False)])
def test_a_runtime_not_found_is_said_only_once_the_kinds_were_listed_or_cannot_be(
    status: int, listed: bool
) -> None:
    informer = RuntimeInformer(FakeCluster(), lambda _: None, None)
    assert not informer.listed()
    for store in (informer.cluster, informer.namespaced):
        store._cannot_read(ClusterError("no", status), 1, 1.0)
    assert informer.listed() is listed

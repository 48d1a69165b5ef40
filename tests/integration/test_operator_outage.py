"""Two operators with leader election through control-plane outages, on a control plane
of this module's own (the shared test cluster is never disturbed): the API server
stopped for 30 s, the Lease API answering 503, etcd frozen. Neither process exits, the
liveness probe stays healthy, the leader stops writing once its Lease may have expired
(its pod requests, counted on /metrics, do not move while the outage lasts), exactly one
replica leads again within the lease duration after the control plane is back, and the
jobs created before and during the outage get exactly their pods, each replica index once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client, config

from cluster.localcluster import LocalCluster
from cluster.outage import api_server_stopped, frozen, lease_api_unavailable
from multigpu_operator.api.names import LABEL_REPLICA_INDEX
from multigpu_operator.election.lease_rules import LeaseTimings
from support.jobs import RUN_LONG, JobEnv, job_manifest
from support.operator_looks import samples
from support.operator_process import OperatorProcess, replicas
from support.own_cluster import own_cluster
from support.waiting import wait_for

# A name of its own: its API server is stopped and its etcd frozen.
OUTAGE_CLUSTER = "mgj-outage"
# Liveness fails after 20 s without progress (600 s by default), so the 30 s outage would
# fail it if a loop that keeps retrying did not count as alive.
OPERATOR_ENV = {
    "MGJ_LEADER_ELECTION": "true",
    "MGJ_LEASE_NAME": "multigpu-operator",
    "MGJ_WATCH_STALE_SECONDS": "20",
}
TIMINGS = LeaseTimings()  # the defaults: 10 s lease, 7 s renew deadline, 2 s retry period
REPLICAS = 2


@pytest.fixture(scope="module")
def plane() -> Iterator[LocalCluster]:
    with own_cluster(OUTAGE_CLUSTER) as cluster:
        yield cluster


@pytest.fixture
def jobs(plane: LocalCluster) -> Iterator[JobEnv]:
    api = config.new_client_from_config(config_file=str(plane.kubeconfig))
    core = client.CoreV1Api(api)
    name = f"outage-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield JobEnv(plane, api, core, name)
    core.delete_namespace(name)


@pytest.fixture
def pair(
    jobs: JobEnv, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[list[OperatorProcess]]:
    kubeconfig = jobs.cluster.kubeconfig
    with replicas(kubeconfig, jobs.namespace, tmp_path, OPERATOR_ENV, request) as operators:
        yield operators


@dataclass
class Sample:
    at: float  # monotonic
    leading: bool
    pod_writes: float  # pod create and delete requests sent, answered or not
    live: bool  # the liveness endpoint answers 200


def sample(operator: OperatorProcess) -> Sample:
    values = samples(operator)
    leading = any(name == "mgj_leader" and value == 1 for name, _, value in values)
    writes = sum(
        value
        for name, labels, value in values
        if name == "mgj_api_requests_total"
        and labels.get("resource") == "pods"
        and labels.get("verb") in ("create", "delete")
    )
    healthz = f"http://127.0.0.1:{operator.liveness_port}/healthz"
    return Sample(time.monotonic(), leading, writes, operator._get(healthz) is not None)


@dataclass
class Watcher:
    """Samples both processes every 0.2 s from a thread of its own."""

    operators: list[OperatorProcess]
    seen: dict[int, list[Sample]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            for i, operator in enumerate(self.operators):
                self.seen.setdefault(i, []).append(sample(operator))
            time.sleep(0.2)

    def between(self, i: int, start: float, end: float) -> list[Sample]:
        return [s for s in self.seen[i] if start <= s.at <= end]


def leaders(operators: list[OperatorProcess]) -> list[OperatorProcess]:
    return [o for o in operators if sample(o).leading]


def indices(jobs: JobEnv, name: str) -> list[str]:
    return sorted(p.metadata.labels[LABEL_REPLICA_INDEX] for p in jobs.pods(name))


def schedulable(jobs: JobEnv) -> bool:
    """Every node Ready and without the node lifecycle controller's taints: after an
    outage its node is marked NotReady (tainted) if kwok's heartbeat resumes late."""
    nodes = jobs.core.list_node().items
    return bool(nodes) and all(
        any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        and not any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or [])
        for node in nodes
    )


def cluster_state(jobs: JobEnv) -> str:
    """What a failed wait needs to be understood: the namespace's pods and events, the
    nodes, and the tail of the controller-manager's, the scheduler's and kwok's logs."""
    lines = ["pods:"]
    for pod in jobs.core.list_namespaced_pod(jobs.namespace).items:
        conditions = [(c.type, c.status, c.reason) for c in pod.status.conditions or []]
        lines.append(f"  {pod.metadata.name} {pod.status.phase} {pod.spec.node_name} {conditions}")
    lines.append("events:")
    for event in jobs.core.list_namespaced_event(jobs.namespace).items:
        lines.append(f"  {event.involved_object.name} {event.reason}: {event.message}")
    lines.append("nodes:")
    for node in jobs.core.list_node().items:
        ready = [c.status for c in node.status.conditions or [] if c.type == "Ready"]
        lines.append(f"  {node.metadata.name} ready={ready} taints={node.spec.taints}")
    for name in ("kube-controller-manager", "kube-scheduler", "kwok-controller"):
        path = jobs.cluster.component_log(name)
        if path.exists():
            tail = path.read_text(errors="replace").splitlines()[-15:]
            lines += [f"{path.name}:"] + [f"  {line}" for line in tail]
    return "\n".join(lines)


def ride_out(
    pair: list[OperatorProcess],
    jobs: JobEnv,
    outage: AbstractContextManager[None],
    seconds: float,
    during: Callable[[], None] = lambda: None,
) -> Watcher:
    """Run `outage` for `seconds` under the two operators, with `during` called once the
    leader's Lease may have expired; checks what holds across it and returns the samples."""
    wait_for(lambda: len(leaders(pair)) == 1, "exactly one leader", timeout=30)
    # The previous test's outage may have left the node NotReady for a while.
    wait_for(lambda: schedulable(jobs), "the node Ready and schedulable", timeout=120)
    jobs.apply(job_manifest("before", replicas=REPLICAS, annotations=RUN_LONG))
    try:
        wait_for(lambda: len(jobs.running("before", REPLICAS)) == REPLICAS, "before running", 90)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{cluster_state(jobs)}") from None
    watcher = Watcher(pair)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        with outage:
            cut = time.monotonic()
            expired = cut + TIMINGS.lease_duration
            time.sleep(TIMINGS.lease_duration)
            during()
            time.sleep(max(0.0, cut + seconds - time.monotonic()))
            back_at = time.monotonic()
        back = time.monotonic()
        wait_for(lambda: len(leaders(pair)) == 1, "one leader again", timeout=60)
        took = time.monotonic() - back
        time.sleep(1)  # a few samples with the new leader
    finally:
        watcher.stop.set()
        thread.join()
    print(f"one leader {took:.1f}s after the control plane was back")
    assert took <= TIMINGS.lease_duration
    for i, operator in enumerate(pair):
        assert operator.proc is not None
        assert operator.proc.poll() is None, f"operator {i} exited:\n{operator.log()}"
        assert all(s.live for s in watcher.seen[i]), f"operator {i} not live:\n{operator.log()}"
        # Past its renew deadline nobody leads, and from the moment the Lease may have
        # expired until the outage ends, no replica sends a pod write.
        expired_window = watcher.between(i, expired, back_at)
        assert expired_window, "no sample while the Lease was expired"
        assert not any(s.leading for s in expired_window), f"operator {i} led"
        writes = {s.pod_writes for s in expired_window}
        assert len(writes) == 1, f"operator {i} wrote pods after its Lease expired: {writes}"
    return watcher


def reconciled(jobs: JobEnv, *names: str) -> None:
    for name in names:

        def running(name: str = name) -> list[object]:
            return jobs.running(name, REPLICAS)

        try:
            wait_for(running, f"{name} running", timeout=90)
        except AssertionError as error:
            raise AssertionError(f"{error}\n{cluster_state(jobs)}") from None
        assert indices(jobs, name) == [str(i) for i in range(REPLICAS)]


def test_the_api_server_stopped_for_30s(pair: list[OperatorProcess], jobs: JobEnv) -> None:
    ride_out(pair, jobs, api_server_stopped(jobs.cluster), 30)
    jobs.apply(job_manifest("after", replicas=REPLICAS, annotations=RUN_LONG))
    reconciled(jobs, "before", "after")


def test_the_lease_api_answering_503(pair: list[OperatorProcess], jobs: JobEnv) -> None:
    def create_during() -> None:
        jobs.apply(job_manifest("during", replicas=REPLICAS, annotations=RUN_LONG))

    ride_out(
        pair, jobs, lease_api_unavailable(jobs.cluster), TIMINGS.lease_duration + 5, create_during
    )
    reconciled(jobs, "before", "during")


def test_etcd_frozen(pair: list[OperatorProcess], jobs: JobEnv) -> None:
    ride_out(pair, jobs, frozen(jobs.cluster, "etcd"), TIMINGS.lease_duration + 5)
    jobs.apply(job_manifest("after", replicas=REPLICAS, annotations=RUN_LONG))
    reconciled(jobs, "before", "after")

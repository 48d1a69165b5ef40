"""A partitioned leader on the real control plane: two operators with leader election, the
leader frozen (SIGSTOP: its connections stay open and it answers nothing, as behind a
partition) past the lease duration while the other takes over and creates pods, then
resumed. The old leader must notice it lost the Lease before it writes anything, stop
acting without exiting, and run for the Lease again: it leads and acts once the new
leader hands over. Every write of both processes is counted on /metrics
(mgj_api_requests_total); no job ends with a missing or duplicate replica index.

While the old leader resumes, the new one is frozen too, for less than its renew
deadline: a job created then is work that only a replica still acting would do, so a
write by the old leader after it lost the Lease cannot hide behind the new leader's.

The other way to lose the Lease, someone else holding it, is staged on one operator by
writing another holder over its Lease: it stops at its next renewal, writes nothing
while it stands by, and takes the Lease back once that holder lets it expire.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cluster.localcluster import LocalCluster
from multigpu_operator.api.names import LABEL_REPLICA_INDEX
from multigpu_operator.election.lease_rules import LeaseTimings
from support.jobs import RUN_LONG, JobEnv, job_manifest
from support.operator_log import reconcile_errors, troubles
from support.operator_looks import samples
from support.operator_process import OperatorProcess, replicas
from support.waiting import wait_for

ELECTION = {"MGJ_LEADER_ELECTION": "true", "MGJ_LEASE_NAME": "multigpu-operator"}
TIMINGS = LeaseTimings()  # the defaults: 10 s lease, 7 s renew deadline, 2 s retry period
REPLICAS = 2
# How long the new leader stays frozen while the old one resumes: well inside its renew
# deadline, so it keeps the Lease.
NEW_LEADER_FROZEN = TIMINGS.renew_deadline / 2
WRITES = ("create", "update", "patch", "delete")
LOST = "stopped reconciling; running for the Lease again"
INTRUDER = "another-replica"


@pytest.fixture
def pair(
    installed_crd: LocalCluster, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[list[OperatorProcess]]:
    with replicas(installed_crd.kubeconfig, namespace, tmp_path, ELECTION, request) as operators:
        yield operators


Samples = list[tuple[str, dict[str, str], float]]


def leading_in(values: Samples) -> bool:
    return any(name == "mgj_leader" and value == 1 for name, _, value in values)


def writes_in(values: Samples) -> float:
    """Write requests the process has sent, answered or not, the Lease's left out."""
    return sum(
        value
        for name, labels, value in values
        if name == "mgj_api_requests_total"
        and labels.get("verb") in WRITES
        and labels.get("resource") != "leases"
    )


def leading(operator: OperatorProcess) -> bool:
    return leading_in(samples(operator))


def writes(operator: OperatorProcess) -> float:
    return writes_in(samples(operator))


def freeze(operator: OperatorProcess) -> None:
    assert operator.proc is not None
    operator.proc.send_signal(signal.SIGSTOP)


def thaw(operator: OperatorProcess) -> None:
    assert operator.proc is not None
    operator.proc.send_signal(signal.SIGCONT)


def indices(jobs: JobEnv, name: str) -> list[str]:
    return sorted(p.metadata.labels[LABEL_REPLICA_INDEX] for p in jobs.pods(name))


def running(jobs: JobEnv, name: str) -> None:
    wait_for(lambda: jobs.running(name, REPLICAS), f"{name} running", timeout=60)
    assert indices(jobs, name) == [str(i) for i in range(REPLICAS)], name


def test_a_partitioned_leader_stops_before_writing_and_runs_again(
    pair: list[OperatorProcess], jobs: JobEnv
) -> None:
    wait_for(lambda: sum(map(leading, pair)) == 1 and all(o.ready() for o in pair), "a leader")
    old, new = pair if leading(pair[0]) else pair[::-1]
    jobs.apply(job_manifest("before", replicas=REPLICAS, annotations=RUN_LONG))
    running(jobs, "before")
    old_writes = writes(old)

    # The leader partitioned past its Lease: the other takes over and acts.
    freeze(old)
    frozen_at = time.monotonic()
    wait_for(lambda: leading(new), "the standby leading", timeout=3 * TIMINGS.lease_duration)
    assert time.monotonic() - frozen_at >= TIMINGS.renew_deadline
    jobs.apply(job_manifest("during", replicas=REPLICAS, annotations=RUN_LONG))
    running(jobs, "during")

    # Work appears that only an acting replica would do, and the old leader resumes.
    freeze(new)
    new_frozen_at = time.monotonic()
    try:
        jobs.apply(job_manifest("after", replicas=REPLICAS, annotations=RUN_LONG))
        thaw(old)
        wait_for(lambda: LOST in old.log(), "the old leader to stop", timeout=NEW_LEADER_FROZEN)
        assert not leading(old)
        # Its workers are gone: from here on it cannot write until it leads again.
        assert writes(old) == old_writes, "the old leader wrote after it lost the Lease"
        assert jobs.pods("after") == []
    finally:
        time.sleep(max(0.0, NEW_LEADER_FROZEN - (time.monotonic() - new_frozen_at)))
        thaw(new)
    running(jobs, "after")
    assert leading(new)
    assert not leading(old)
    assert writes(old) == old_writes
    assert old.proc is not None
    assert old.proc.poll() is None, "the old leader exited"

    # It stands by, alive and warm, and leads and acts again once the Lease is handed over.
    wait_for(old.ready, "the old leader a ready candidate")
    new.terminate()
    wait_for(lambda: leading(old), "the old leader leading again", timeout=TIMINGS.lease_duration)
    jobs.apply(job_manifest("again", replicas=REPLICAS, annotations=RUN_LONG))
    running(jobs, "again")
    assert writes(old) > old_writes
    for name in ("before", "during", "after"):
        assert indices(jobs, name) == [str(i) for i in range(REPLICAS)], name
    assert reconcile_errors(old) == 0
    # The warnings it logged are the loss itself; nothing else, no traceback.
    lines = troubles(old)
    assert lines, old.log()
    assert all("Lease" in line or "leadership" in line for line in lines), lines


@pytest.fixture
def lone(
    installed_crd: LocalCluster, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    operator = OperatorProcess(installed_crd.kubeconfig, namespace, tmp_path / "a.log", ELECTION)
    operator.start()
    yield operator
    operator.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(operator.log())


def test_a_deposed_leader_stops_acting_stays_alive_and_takes_the_lease_back(
    lone: OperatorProcess, jobs: JobEnv
) -> None:
    """Someone else holds the Lease (written over the leader's, as a replica that took
    it would): the leader stops at its next renewal, acts on nothing while it stands
    by, and takes the Lease once it expires (the intruder never renews it)."""
    wait_for(lambda: leading(lone), "the operator leading")
    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {"holderIdentity": INTRUDER, "renewTime": renewed, "leaseDurationSeconds": 10}
    jobs.cluster.kubectl(
        "patch", "lease", ELECTION["MGJ_LEASE_NAME"], "-n", jobs.namespace, "--type=merge",
        "-p", json.dumps({"spec": spec}),
    )  # fmt: skip
    wait_for(lambda: LOST in lone.log(), "the deposed leader to stop", timeout=10)
    assert not leading(lone)
    assert f"the Lease is held by {INTRUDER}" in lone.log()
    stood_by = writes(lone)
    jobs.apply(job_manifest("meanwhile", replicas=REPLICAS, annotations=RUN_LONG))
    # Every sample while it stands by shows no write; then it leads again, of itself.
    seen: list[tuple[bool, float]] = []

    def leads_again() -> bool:
        values = samples(lone)
        seen.append((leading_in(values), writes_in(values)))
        return seen[-1][0]

    wait_for(leads_again, "the Lease taken back", timeout=3 * TIMINGS.lease_duration)
    assert all(count == stood_by for led, count in seen if not led), seen
    assert len(seen) > 1
    running(jobs, "meanwhile")
    assert writes(lone) > stood_by
    assert lone.proc is not None
    assert lone.proc.poll() is None, "the deposed leader exited"

"""Two operators with leader election on the real control plane: a standby takes over a
killed leader within 15 s, a gracefully stopped one hands over at once, and with the
leader killed and restarted again and again while jobs are created, scale and fail, no
job ever has a duplicate pod or a pod of a wrong attempt (the invariants of
test_operator_faults.py). MGJ_FAULT_SEED picks another schedule of kills.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from integration.test_operator_faults import WAIT, check, drive_disrupted

from cluster.localcluster import LocalCluster
from support.jobs import RUN_LONG, JobEnv, job_manifest
from support.operator_log import reconcile_errors, troubles
from support.operator_process import OperatorProcess, replicas
from support.waiting import wait_for

SEED = int(os.environ.get("MGJ_FAULT_SEED", "13"))
# The Lease lives in the test's own namespace (MGJ_LEASE_NAMESPACE defaults to the watched
# one), at the default timings: 10 s lease, 7 s renew deadline, 2 s retry period.
ELECTION = {"MGJ_LEADER_ELECTION": "true", "MGJ_LEASE_NAME": "multigpu-operator"}
TAKEOVER_AFTER_KILL = 15.0  # the bound at the default timings
TAKEOVER_AFTER_TERM = 4.0  # one retry period of the standby, and the leader's shutdown
KILLS = 12
LEADING_SECONDS = (0.5, 4.0)  # how long a leader leads before it is stopped


@pytest.fixture
def pair(
    installed_crd: LocalCluster, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[list[OperatorProcess]]:
    """Two operators with leader election, watching this test's namespace."""
    with replicas(installed_crd.kubeconfig, namespace, tmp_path, ELECTION, request) as operators:
        yield operators


def leading(operator: OperatorProcess) -> bool:
    """Whether the process serves mgj_leader 1 (False if it does not answer)."""
    try:
        return "\nmgj_leader 1.0" in operator.metrics()
    except RuntimeError:
        return False


def the_leader(operators: list[OperatorProcess]) -> OperatorProcess:
    found: list[OperatorProcess] = []

    def one_leads() -> bool:
        found[:] = [o for o in operators if o.proc and o.proc.poll() is None and leading(o)]
        return len(found) == 1

    wait_for(one_leads, "exactly one leader", timeout=30)
    return found[0]


def seconds_until_reconciled(jobs: JobEnv, name: str, since: float) -> float:
    """Create job `name` and wait until an operator wrote its first status."""
    jobs.apply(job_manifest(name, annotations=RUN_LONG))
    wait_for(lambda: jobs.status(name).get("phase") is not None, f"{name} reconciled", 60)
    return time.monotonic() - since


def test_a_standby_reconciles_within_15s_after_the_leader_is_killed(
    pair: list[OperatorProcess], jobs: JobEnv
) -> None:
    leader = the_leader(pair)
    (standby,) = [o for o in pair if o is not leader]
    wait_for(lambda: leader.ready() and standby.ready(), "both replicas Ready", timeout=30)
    jobs.apply(job_manifest("before", annotations=RUN_LONG))
    jobs.wait_phase("before", "Running")
    killed = time.monotonic()
    leader.kill()
    took = seconds_until_reconciled(jobs, "after-kill", killed)
    print(f"takeover after SIGKILL of the leader: {took:.1f}s")
    assert took <= TAKEOVER_AFTER_KILL
    assert leading(standby)
    jobs.wait_phase("after-kill", "Running")
    assert troubles(standby) == [], standby.log()


def test_a_gracefully_stopped_leader_hands_over_at_once(
    pair: list[OperatorProcess], jobs: JobEnv
) -> None:
    leader = the_leader(pair)
    (standby,) = [o for o in pair if o is not leader]
    wait_for(standby.ready, "the standby Ready", timeout=30)
    stopped = time.monotonic()
    leader.terminate()
    took = seconds_until_reconciled(jobs, "after-term", stopped)
    print(f"takeover after SIGTERM of the leader: {took:.1f}s")
    assert took <= TAKEOVER_AFTER_TERM
    assert leader.proc is not None
    assert leader.proc.wait(timeout=15) == 0
    assert "released the Lease" in leader.log()
    assert troubles(standby) == [], standby.log()


@dataclass
class LeaderStopper:
    """Stops whichever operator leads (SIGKILL or SIGTERM, by the seed) after a random
    time, starts it again as a standby, and checks that never two processes lead."""

    operators: list[OperatorProcess]
    rng: random.Random
    stops: list[str] = field(default_factory=list)
    double_leaders: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        try:
            while not (self.stop.is_set() and len(self.stops) >= KILLS):
                leader = the_leader(self.operators)
                deadline = time.monotonic() + self.rng.uniform(*LEADING_SECONDS)
                while time.monotonic() < deadline:
                    self.double_leaders += sum(map(leading, self.operators)) > 1
                    time.sleep(0.1)
                if self.rng.random() < 0.5:
                    leader.kill()
                    self.stops.append("KILL")
                else:
                    leader.stop()  # SIGTERM, waiting for the exit
                    self.stops.append("TERM")
                leader.start()
        except BaseException as err:  # reported by the test thread
            self.error = err


def test_the_leader_stopped_again_and_again_never_splits_a_job(
    pair: list[OperatorProcess], jobs: JobEnv
) -> None:
    rng = random.Random(SEED)
    stopper = LeaderStopper(pair, random.Random(rng.random()))
    watcher = drive_disrupted(jobs, rng, stopper, join_seconds=KILLS * 30)
    assert stopper.error is None, f"seed {SEED}: {stopper.error!r}"
    print(f"seed {SEED}: leader stopped {len(stopper.stops)} times: {' '.join(stopper.stops)}")
    assert len(stopper.stops) >= KILLS
    assert stopper.double_leaders == 0, f"seed {SEED}"

    problems: list[str] = []

    def holds() -> bool:
        problems[:] = check(jobs)
        return not problems

    try:
        wait_for(holds, "the invariants", timeout=WAIT)
    except AssertionError as err:
        raise AssertionError(f"seed {SEED}: {problems}") from err
    assert watcher.violations == [], f"seed {SEED}"
    for operator in pair:
        assert troubles(operator) == [], operator.log()
    assert reconcile_errors(the_leader(pair)) == 0

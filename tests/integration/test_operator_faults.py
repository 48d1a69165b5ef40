"""The operator SIGKILLed at random moments, dozens of times, while jobs are created,
fail and restart, scale, suspend, resume and are deleted on the real control plane.
Whatever the moment, the end is the one a never-killed operator reaches: no duplicate
replica index, no pod of a wrong attempt, no orphan pod or Service, a Service for every
job, exact attempt and restart counts, the right final phases, and nothing logged as an
error. MGJ_FAULT_SEED picks another schedule of kills (the seed is printed on failure).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from kubernetes import client

from support.jobs import RUN_LONG, SIM, JobEnv, condition, job_manifest
from support.operator_log import assert_calm
from support.operator_process import OperatorProcess
from support.waiting import wait_for

SEED = int(os.environ.get("MGJ_FAULT_SEED", "13"))
KILLS = 24
ALIVE_SECONDS = (0.3, 4.0)  # how long each operator process lives before its SIGKILL
JOB_LABEL = "multigpu.dev/job-name"
ATTEMPT_LABEL = "multigpu.dev/attempt"
INDEX_LABEL = "multigpu.dev/replica-index"
WAIT = 120.0  # seconds any one step may take with the operator down part of the time


@dataclass(frozen=True)
class Expected:
    """How a job ends: its phase, the reason of its Failed condition, its counters."""

    phase: str
    attempt: int
    restarts: int = 0
    reason: str | None = None
    pods: int | None = None  # live pods at the end, where the phase fixes them


EXPECTED = {
    "ok-a": Expected("Succeeded", 1),
    "ok-b": Expected("Succeeded", 1),
    "flaky": Expected("Failed", 3, 2, "BackoffLimitExceeded"),
    "fatal": Expected("Failed", 1, 0, "NonRetryableExitCode"),
    "susp": Expected("Running", 3, pods=2),  # two resumes: two fresh attempts
    "el": Expected("Running", 1, pods=3),
    "svc": Expected("Running", 1, pods=2),
}


def manifests() -> list[dict[str, Any]]:
    fail = {f"{SIM}/fail-after": "4s", f"{SIM}/exit-code": "1"}
    return [
        job_manifest("ok-a", annotations={f"{SIM}/succeed-after": "20s"}),
        job_manifest("flaky", annotations=fail, runPolicy={"backoffLimit": 2}),
        job_manifest("susp", annotations=RUN_LONG),
        job_manifest("fatal", annotations=fail, runPolicy={"restartPolicy": "ExitCode"}),
        job_manifest("el", "Elastic", 2, 0, RUN_LONG, elastic={"minReplicas": 1, "maxReplicas": 4}),
        job_manifest("gone", annotations=RUN_LONG),
        job_manifest("svc", annotations=RUN_LONG),
        job_manifest("ok-b", annotations={f"{SIM}/succeed-after": "45s"}),
    ]


@dataclass
class Killer:
    """SIGKILLs the operator after a random lifetime and starts a new one, until
    stopped (and at least `kills` times)."""

    operator: OperatorProcess
    rng: random.Random
    kills: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        try:
            while not (self.stop.is_set() and self.kills >= KILLS):
                time.sleep(self.rng.uniform(*ALIVE_SECONDS))
                self.operator.kill()
                self.kills += 1
                self.operator.start()
        except BaseException as err:  # reported by the test thread
            self.error = err


@dataclass
class Watcher:
    """Samples every job's status while the kills go on: counters never go back."""

    jobs: JobEnv
    stop: threading.Event = field(default_factory=threading.Event)
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def run(self) -> None:
        while not self.stop.is_set():
            for job in all_jobs(self.jobs):
                name, status = job["metadata"]["name"], job.get("status") or {}
                now = (int(status.get("attempt", 0)), int(status.get("restarts", 0)))
                before = self.seen.get(name, (0, 0))
                if now[0] < before[0] or now[1] < before[1]:
                    self.violations.append(f"{name}: (attempt, restarts) {before} -> {now}")
                self.seen[name] = max(before, now)
            time.sleep(0.3)


def all_jobs(jobs: JobEnv) -> list[dict[str, Any]]:
    listed = client.CustomObjectsApi(jobs.api).list_namespaced_custom_object(
        "multigpu.dev", "v1alpha1", jobs.namespace, "multigpujobs"
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


def live(pods: list[Any]) -> list[Any]:
    return [p for p in pods if not p.metadata.deletion_timestamp]


def drive(jobs: JobEnv, rng: random.Random) -> None:
    """What users and the cluster do meanwhile, step by step."""
    for manifest in manifests():
        jobs.apply(manifest)
        time.sleep(rng.uniform(0, 1.5))
    for suspend, phase in ((True, "Suspended"), (False, "Running")) * 2:
        jobs.wait_phase("susp", "Running" if suspend else "Suspended", timeout=WAIT)
        jobs.patch_spec("susp", {"suspend": suspend})
        jobs.wait_phase("susp", phase, timeout=WAIT)
    for replicas in (4, 1, 3):
        jobs.scale("el", replicas)
        wait_for(partial(jobs.running, "el", replicas), f"el at {replicas}", timeout=WAIT)
    jobs.wait_phase("gone", "Running", timeout=WAIT)
    jobs.cluster.kubectl("delete", "-n", jobs.namespace, "mgj/gone", "--wait=false")
    jobs.wait_phase("svc", "Running", timeout=WAIT)
    jobs.core.delete_namespaced_service("svc", jobs.namespace)


class Disruptor(Protocol):
    """What stops operators while jobs are driven: runs in a thread until `stop` is set."""

    stop: threading.Event

    def run(self) -> None: ...


def drive_disrupted(
    jobs: JobEnv, rng: random.Random, disruptor: Disruptor, join_seconds: float
) -> Watcher:
    """`drive()` the jobs to their expected phases while `disruptor` runs in a thread, a
    Watcher recording violations the whole time; the watcher, once both have stopped."""
    watcher = Watcher(jobs)
    threads = [threading.Thread(target=t.run, daemon=True) for t in (disruptor, watcher)]
    for thread in threads:
        thread.start()
    try:
        drive(jobs, rng)
        for name, expected in EXPECTED.items():
            jobs.wait_phase(name, expected.phase, timeout=WAIT)
    finally:
        disruptor.stop.set()
        threads[0].join(timeout=join_seconds)
        watcher.stop.set()
        threads[1].join()
    return watcher


def test_the_operator_killed_dozens_of_times_ends_every_job_as_if_never_killed(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    rng = random.Random(SEED)
    killer = Killer(operator, random.Random(rng.random()))
    watcher = drive_disrupted(jobs, rng, killer, join_seconds=KILLS * 10)
    assert killer.error is None, f"seed {SEED}: {killer.error!r}"
    assert killer.kills >= KILLS
    if operator.proc is None or operator.proc.poll() is not None:
        operator.start()

    settle_and_check(jobs, operator)
    assert watcher.violations == [], f"seed {SEED}"


def settle_and_check(jobs: JobEnv, operator: OperatorProcess) -> None:
    """The last process finishes what the killed ones left (a pod to delete, a Service to
    create), garbage collection removes what the deleted job owned: then every invariant
    holds, and nothing was logged as an error by any of the processes."""
    problems: list[str] = []

    def holds() -> bool:
        problems[:] = check(jobs)
        return not problems

    try:
        wait_for(holds, "the invariants", timeout=WAIT)
    except AssertionError as err:
        raise AssertionError(f"seed {SEED}: {problems}") from err
    assert_calm(operator)


def check(jobs: JobEnv) -> list[str]:
    """Every invariant that does not hold now."""
    problems: list[str] = []
    by_name = {j["metadata"]["name"]: j for j in all_jobs(jobs)}
    uids = {j["metadata"]["uid"] for j in by_name.values()}
    if "gone" in by_name:
        problems.append("the deleted job is still there")
    pods = jobs.core.list_namespaced_pod(jobs.namespace, label_selector=JOB_LABEL).items
    services = jobs.core.list_namespaced_service(jobs.namespace, label_selector=JOB_LABEL).items
    for obj in [*pods, *services]:
        owners = {ref.uid for ref in obj.metadata.owner_references or []}
        if not owners & uids:
            problems.append(f"orphan {obj.kind or type(obj).__name__} {obj.metadata.name}")
    with_service = {s.metadata.labels[JOB_LABEL] for s in services}
    for name, expected in EXPECTED.items():
        job = by_name.get(name)
        if job is None:
            problems.append(f"{name} is missing")
            continue
        problems += check_job(name, job, live([p for p in pods if job_of(p) == name]), expected)
        if name not in with_service:
            problems.append(f"{name} has no Service")
    return problems


def check_job(name: str, job: dict[str, Any], pods: list[Any], expected: Expected) -> list[str]:
    status = job.get("status") or {}
    problems = []
    got = (status.get("phase"), status.get("attempt"), status.get("restarts"))
    if got != (expected.phase, expected.attempt, expected.restarts):
        problems.append(f"{name}: (phase, attempt, restarts) {got}, expected {expected}")
    if expected.reason and condition(status, "Failed").get("reason") != expected.reason:
        problems.append(f"{name}: Failed {condition(status, 'Failed')}")
    indexes = Counter(p.metadata.labels[INDEX_LABEL] for p in pods)
    problems += [f"{name}: replica {i} twice" for i, n in indexes.items() if n > 1]
    attempts = {int(p.metadata.labels[ATTEMPT_LABEL]) for p in pods}
    elastic = job["spec"]["mode"] == "Elastic"
    wrong = {a for a in attempts if (a > expected.attempt if elastic else a != expected.attempt)}
    if wrong:
        problems.append(f"{name}: pods of attempts {sorted(wrong)}")
    if expected.pods is not None:
        running = [p for p in pods if p.status.phase == "Running"]
        if len(pods) != expected.pods or len(running) != expected.pods:
            problems.append(f"{name}: {len(running)} of {len(pods)} pods running")
    return problems


def job_of(pod: Any) -> str:
    return str(pod.metadata.labels.get(JOB_LABEL, ""))

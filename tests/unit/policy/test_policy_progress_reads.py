"""Which processes of a running job are read, what their readings make, and the write
budget's turns (policy/progress_reads.py, pure): tables over pods, readings and times."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from multigpu_operator.api.spec import Mode
from multigpu_operator.policy import training as gauges
from multigpu_operator.policy.progress_reads import (
    JobKey,
    JobReading,
    Place,
    Served,
    Target,
    current,
    due,
    everyone,
    folded,
    leader,
    process_reports,
    processes_per_pod,
    read_everyone_after,
    reads_everyone,
    running_jobs,
    served,
    target,
    turn_budget,
)
from multigpu_operator.policy.training import TrainingReport
from support.policy import at, pod

PORT = 9300
DDP = Served(port=PORT, processes=2, elastic=False)


def up(index: int, attempt: int = 1, **fields: Any) -> dict[str, Any]:
    """Replica `index` of attempt `attempt` running at 10.0.0.<index> on node n<index>;
    `fields` override the pod's status (phase, podIP) or mark it deleting."""
    deleting = fields.pop("deleting", False)
    made = pod(index, "Running", attempt=attempt, node=f"n{index}", deleting=deleting)
    made["status"] = {**made["status"], "podIP": f"10.0.0.{index}", **fields}
    return made


def job_body(phase: str | None = "Running", attempt: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if attempt is not None:
        status["attempt"] = attempt
    return {"metadata": {"name": "job"}, "status": status}


def names(chosen: Target | None) -> list[str] | None:
    return None if chosen is None else [p["metadata"]["name"] for p in chosen.pods]


def report(**fields: Any) -> TrainingReport:
    """Attempt 1 at step 10, read at T0+100, the step last moved at T0+90."""
    return replace(
        TrainingReport(attempt=1, step=10, read_at=at(100), last_change=at(90)), **fields
    )


# Target choice -------------------------------------------------------------------------


def test_running_jobs_are_those_in_phase_running() -> None:
    jobs = {
        ("ns", "a"): job_body("Running"),
        ("ns", "b"): job_body("Pending"),
        ("ns", "c"): job_body(None),
        ("ns", "d"): {"metadata": {}},
        ("ns", "e"): job_body("Running"),
    }
    assert running_jobs(jobs) == [("ns", "a"), ("ns", "e")]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param([], 1, id="unset-one"),
        pytest.param([{"name": "PET_NPROC_PER_NODE", "value": "4"}], 4, id="torchrun"),
        pytest.param([{"name": "PET_NPROC_PER_NODE", "value": "auto"}], 1, id="not-a-number"),
        pytest.param([{"name": "OTHER", "value": "4"}], 1, id="other-var"),
    ],
)
def test_processes_per_pod(env: list[dict[str, str]], expected: int) -> None:
    assert processes_per_pod({"name": "trainer", "env": env}) == expected


@pytest.mark.parametrize(
    ("containers", "mode", "expected"),
    [
        pytest.param(
            [{"name": "trainer", "env": [{"name": "MGJ_TRAINER_METRICS_PORT", "value": "9300"}]}],
            Mode.DISTRIBUTED_DATA_PARALLEL,
            Served(9300, 1, elastic=False),
            id="ddp",
        ),
        pytest.param(
            [
                {"name": "sidecar", "env": [{"name": "MGJ_TRAINER_METRICS_PORT", "value": "1"}]},
                {
                    "name": "trainer",
                    "env": [
                        {"name": "MGJ_TRAINER_METRICS_PORT", "value": "9400"},
                        {"name": "PET_NPROC_PER_NODE", "value": "8"},
                    ],
                },
            ],
            Mode.ELASTIC,
            Served(9400, 8, elastic=True),
            id="the-trainer-container-elastic",
        ),
        pytest.param(
            [{"name": "trainer", "env": [{"name": "MGJ_TRAINER_METRICS_PORT", "value": "0"}]}],
            Mode.DISTRIBUTED_DATA_PARALLEL,
            Served(0, 1, elastic=False),
            id="metrics-off",
        ),
    ],
)
def test_served_reads_the_trainer_container(
    containers: list[dict[str, Any]], mode: Mode, expected: Served
) -> None:
    assert served({"spec": {"containers": containers}}, mode) == expected


@pytest.mark.parametrize(
    ("where", "job", "pods", "expected"),
    [
        pytest.param(DDP, job_body(), [up(1), up(0)], ["job-0", "job-1"], id="by-replica-index"),
        pytest.param(replace(DDP, port=0), job_body(), [up(0)], None, id="serves-no-metrics"),
        pytest.param(DDP, job_body(), [], None, id="no-pods"),
        pytest.param(
            DDP, job_body(attempt=2), [up(0, 1), up(1, 2)], ["job-1"], id="this-attempt-only"
        ),
        pytest.param(
            replace(DDP, elastic=True),
            job_body(attempt=2),
            [up(0, 1), up(1, 2), up(2, 3)],
            ["job-0", "job-1"],
            id="elastic-every-attempt-up-to-it",
        ),
        pytest.param(DDP, job_body(), [up(0, deleting=True), up(1)], ["job-1"], id="deleting"),
        pytest.param(DDP, job_body(), [up(0, phase="Pending"), up(1)], ["job-1"], id="pending"),
        pytest.param(DDP, job_body(), [up(0, podIP=""), up(1)], ["job-1"], id="no-ip"),
        pytest.param(DDP, job_body(), [up(0, attempt=2)], None, id="a-later-attempt"),
    ],
)
def test_target_is_the_running_pods_of_the_attempt(
    where: Served, job: dict[str, Any], pods: list[dict[str, Any]], expected: list[str] | None
) -> None:
    assert names(target(where, job, pods)) == expected


def test_target_carries_attempt_port_and_processes() -> None:
    chosen = target(DDP, job_body(attempt=3), [up(0, 3)])
    assert chosen is not None
    assert (chosen.attempt, chosen.port, chosen.processes) == (3, PORT, 2)


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([up(0), up(1)], ("10.0.0.0", PORT), id="replica-0-local-rank-0"),
        pytest.param([up(1), up(2)], None, id="replica-0-not-running"),
    ],
)
def test_leader_is_replica_0s_first_process(
    pods: list[dict[str, Any]], expected: tuple[str, int] | None
) -> None:
    first = leader(Target(1, PORT, 2, tuple(pods)))
    assert (None if first is None else (first.ip, first.port)) == expected


def test_everyone_is_every_process_by_rank() -> None:
    places = everyone(Target(1, PORT, 2, (up(0), up(1))))
    assert [(p.ip, p.local_rank, p.port) for p in places] == [
        ("10.0.0.0", 0, PORT),
        ("10.0.0.0", 1, PORT + 1),
        ("10.0.0.1", 0, PORT),
        ("10.0.0.1", 1, PORT + 1),
    ]


@pytest.mark.parametrize(
    ("step_seconds", "still", "after", "expected"),
    [
        pytest.param(None, 14, 15.0, False, id="within-one-period"),
        pytest.param(None, 15, 15.0, True, id="one-period"),
        pytest.param(0.5, 15, 15.0, True, id="fast-steps-one-period"),
        pytest.param(20.0, 39, 40.0, False, id="slow-steps-two-steps"),
        pytest.param(20.0, 40, 40.0, True, id="slow-steps-after-two-steps"),
    ],
)
def test_every_process_is_read_once_the_step_stood_still(
    step_seconds: float | None, still: float, after: float, expected: bool
) -> None:
    seen = report(step_seconds=step_seconds, last_change=at(0))
    assert read_everyone_after(seen) == after
    assert reads_everyone(seen, at(still)) is expected


# Readings into a report ------------------------------------------------------------------


def gauges_at(step: int, **more: float) -> dict[str, float]:
    return {gauges.STEP: step, **more}


@pytest.mark.parametrize(
    ("before", "read", "expected"),
    [
        pytest.param(None, None, None, id="no-answer-nothing-before"),
        pytest.param(None, {gauges.EPOCH: 1}, None, id="no-step-nothing-before"),
        pytest.param(report(), None, report(), id="no-answer-keeps-the-report"),
        pytest.param(report(), {gauges.EPOCH: 1}, report(), id="no-step-keeps-the-report"),
        pytest.param(
            None,
            gauges_at(10),
            report(read_at=at(120), last_change=at(120)),
            id="first-reading",
        ),
        pytest.param(
            report(),
            gauges_at(10),
            report(read_at=at(120), last_change=at(90)),
            id="same-step-stands-still",
        ),
        pytest.param(
            report(),
            gauges_at(11),
            report(step=11, read_at=at(120), last_change=at(120)),
            id="new-step-moves",
        ),
        pytest.param(
            report(),
            gauges_at(10, **{gauges.CHECKPOINTING: 1}),
            report(read_at=at(120), last_change=at(120), checkpointing=True),
            id="checkpointing-is-a-change",
        ),
        pytest.param(
            report(checkpointing=True),
            gauges_at(10, **{gauges.CHECKPOINTING: 1}),
            report(read_at=at(120), last_change=at(90), checkpointing=True),
            id="a-checkpoint-in-progress-is-not",
        ),
        pytest.param(
            report(checkpointing=True),
            gauges_at(10),
            report(read_at=at(120), last_change=at(120)),
            id="a-checkpoint-just-written-is-a-change",
        ),
        pytest.param(
            None,
            gauges_at(
                10,
                **{
                    gauges.TOTAL_STEPS: 100,
                    gauges.EPOCH: 2,
                    gauges.SAMPLES_PER_SECOND: 64.0,
                    gauges.STEP_SECONDS: 0.5,
                    gauges.RESUMED_STEP: 4,
                },
            ),
            report(
                read_at=at(120),
                last_change=at(120),
                total_steps=100,
                epoch=2,
                samples_per_second=64.0,
                step_seconds=0.5,
                resumed_step=4,
            ),
            id="every-gauge",
        ),
        pytest.param(
            None,
            gauges_at(
                10, **{gauges.TOTAL_STEPS: 0, gauges.STEP_SECONDS: 0, gauges.RESUMED_STEP: 0}
            ),
            report(read_at=at(120), last_change=at(120)),
            id="zeros-are-unknown",
        ),
    ],
)
def test_folded(
    before: TrainingReport | None,
    read: dict[str, float] | None,
    expected: TrainingReport | None,
) -> None:
    assert folded(before, 1, read, at(120)) == expected


def test_process_reports_name_each_rank_and_the_silent_ones() -> None:
    places = (
        Place(up(0), 0, PORT),
        Place(up(0), 1, PORT + 1),
        Place(up(1), 0, PORT),
        Place(up(1), 1, PORT + 1),
    )
    reads = [gauges_at(5), gauges_at(5, **{gauges.CHECKPOINTING: 1}), None, {gauges.EPOCH: 0}]
    got = process_reports(places, 2, reads)
    assert [(p.pod, p.replica, p.local_rank, p.rank, p.node) for p in got] == [
        ("job-0", 0, 0, 0, "n0"),
        ("job-0", 0, 1, 1, "n0"),
        ("job-1", 1, 0, 2, "n1"),
        ("job-1", 1, 1, 3, "n1"),
    ]
    assert [(p.answered, p.step, p.checkpointing) for p in got] == [
        (True, 5, False),
        (True, 5, True),
        (False, None, False),
        (False, None, False),
    ]


# The write budget ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("writes_per_second", "expected"),
    [
        pytest.param(2.0, 30, id="default"),
        pytest.param(0.2, 3, id="slow"),
        pytest.param(0.01, 1, id="at-least-one"),
    ],
)
def test_turn_budget_is_writes_per_reading_period(writes_per_second: float, expected: int) -> None:
    assert turn_budget(writes_per_second) == expected


def test_a_turn_is_given_and_taken_once() -> None:
    held = JobReading(report())
    assert held.for_pass().publish is False
    given = held.given_turn(at(100))
    assert (given.shown_step, given.shown_at) == (10, at(100))
    assert given.for_pass() == replace(report(), publish=True)
    newer = given.recorded(report(step=11, publish=True))
    assert newer.turn  # a newer report keeps the turn
    assert newer.report == report(step=11)
    assert newer.taken().for_pass().publish is False
    assert newer.taken().shown_step == 10


@pytest.mark.parametrize(
    ("attempt", "kept"),
    [pytest.param(1, True, id="same-attempt"), pytest.param(2, False, id="a-new-attempt")],
)
def test_current_is_the_reading_of_the_attempt(attempt: int, kept: bool) -> None:
    held = JobReading(report())
    assert (current(held, attempt) is held) is kept
    assert current(None, attempt) is None


def shown(step: int, shown_step: int | None = None, shown_at: float | None = None) -> JobReading:
    when: datetime | None = None if shown_at is None else at(shown_at)
    return JobReading(report(step=step), shown_step=shown_step, shown_at=when)


@pytest.mark.parametrize(
    ("readings", "budget", "expected"),
    [
        pytest.param({"a": shown(10)}, 5, ["a"], id="never-shown"),
        pytest.param({"a": shown(10, 10, 0)}, 5, [], id="same-step-no-turn"),
        pytest.param({"a": shown(11, 10, 90)}, 5, [], id="shown-within-the-period"),
        pytest.param({"a": shown(11, 10, 86)}, 5, ["a"], id="period-less-a-second"),
        pytest.param({"a": shown(11, 10, 85)}, 5, ["a"], id="a-period-ago"),
        pytest.param(
            {
                "a": shown(11, 10, 50),
                "b": shown(11, 10, 10),
                "c": shown(11),
                "d": shown(11, 10, 30),
            },
            3,
            ["c", "b", "d"],
            id="longest-ago-first-within-the-budget",
        ),
        pytest.param({"b": shown(10), "a": shown(10)}, 1, ["a"], id="ties-by-key"),
    ],
)
def test_due_turns(readings: dict[str, JobReading], budget: int, expected: list[str]) -> None:
    keyed: dict[JobKey, JobReading] = {("ns", name): r for name, r in readings.items()}
    assert due(keyed, at(100), budget) == [("ns", name) for name in expected]

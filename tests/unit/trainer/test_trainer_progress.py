"""The progress a training process serves for the operator (multigpu_train.progress):
served on the metrics port and read the operator's way (the ``name[]`` filter and
prometheus_client's parser), the helper's no-op and failure cases, its maths, and the
gauge names the operator reads against those the trainer and the helper serve."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from multigpu_operator.local.host import free_port
from multigpu_operator.policy import training
from multigpu_train import metrics, progress

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(port: int, names: tuple[str, ...] = training.GAUGES) -> Samples:
    """What the operator reads: only ``names``, through prometheus_client's filter."""
    query = "&".join(f"name[]={name}" for name in names)
    url = f"http://127.0.0.1:{port}/metrics?{query}"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def reporter(clock: Clock | None = None) -> tuple[progress.Reporter, CollectorRegistry]:
    registry = CollectorRegistry()
    return progress.Reporter(registry, "j", 3, clock or Clock()), registry


def value(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name, {"job": "j", "rank": "3"})


def test_served_from_the_environment_and_read_with_the_name_filter() -> None:
    base = free_port()
    environ = {
        "MGJ_TRAINER_METRICS_PORT": str(base - 1),  # LOCAL_RANK 1 serves one port up
        "LOCAL_RANK": "1",
        "RANK": "5",
        "MGJ_JOB_NAME": "train",
    }
    served = progress.ProcessReporter(environ)
    process = served.get()
    assert process is not None
    assert served.get() is process  # one per process
    process.resumed_at(40)
    process.report(41, total_steps=100, epoch=2, samples=32)
    with process.checkpointing():
        found = scrape(base)
    key = (("job", "train"), ("rank", "5"))
    assert set(found) == set(training.GAUGES)
    assert {name: found[name][key] for name in training.GAUGES} == {
        training.STEP: 41,
        training.TOTAL_STEPS: 100,
        training.EPOCH: 2,
        # One step timed by the real clock between the two calls.
        training.SAMPLES_PER_SECOND: pytest.approx(32 / found[training.STEP_SECONDS][key]),
        training.STEP_SECONDS: found[training.STEP_SECONDS][key],
        training.CHECKPOINTING: 1,
        training.RESUMED_STEP: 40,
    }
    assert found[training.STEP_SECONDS][key] > 0
    # The filter leaves out what was not asked for.
    assert set(scrape(base, (training.STEP,))) == {training.STEP}
    assert scrape(base)[training.CHECKPOINTING][key] == 0


@pytest.mark.parametrize(
    "environ",
    [{}, {"MGJ_TRAINER_METRICS_PORT": "0"}, {"MGJ_TRAINER_METRICS_PORT": ""}],
    ids=["unset", "zero", "empty"],
)
def test_no_port_means_nothing_is_served_and_calls_do_nothing(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served = progress.ProcessReporter(environ)
    assert served.get() is None
    monkeypatch.setattr(progress, "_process", served)
    progress.resumed_at(3)
    progress.report(4, total_steps=10, epoch=0, samples=8)
    with progress.checkpointing():
        pass
    assert served.get() is None


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"MGJ_TRAINER_METRICS_PORT": "nine"}, "progress not served: invalid literal"),
        ({"MGJ_TRAINER_METRICS_PORT": "9300", "LOCAL_RANK": "x"}, "progress not served"),
    ],
    ids=["port", "local-rank"],
)
def test_bad_numbers_warn_and_do_nothing(
    environ: dict[str, str], says: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "multigpu_train.progress"):
        assert progress.ProcessReporter(environ).get() is None
    assert says in caplog.text


def test_a_taken_port_warns_once_and_training_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        served = progress.ProcessReporter({"MGJ_TRAINER_METRICS_PORT": str(port)})
        monkeypatch.setattr(progress, "_process", served)
        with caplog.at_level(logging.WARNING, "multigpu_train.progress"):
            for step in range(1, 4):
                progress.report(step, samples=4)
                with progress.checkpointing():
                    pass
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"progress not served on port {port} (MGJ_TRAINER_METRICS_PORT={port}" in (
        warnings[0].getMessage()
    )


def test_the_helper_reaches_the_trainers_gauges_in_its_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Our trainer serves first; a script's calls in the same process start no second
    # server and land in the trainer's registry.
    monkeypatch.setattr(progress, "_process", progress.ProcessReporter({}))
    port = free_port()
    served = metrics.start(port, 0, "mixed", 0, world_size=1, restarts=0)
    progress.report(7, total_steps=9)
    with progress.checkpointing():
        assert scrape(port)[training.CHECKPOINTING][(("job", "mixed"), ("rank", "0"))] == 1
    found = scrape(port)
    assert found[training.STEP][(("job", "mixed"), ("rank", "0"))] == 7
    assert served.progress.step is progress._process.get().step  # type: ignore[union-attr]


def test_reports_time_the_steps_between_them() -> None:
    clock = Clock()
    r, registry = reporter(clock)
    r.report(10, samples=8)  # the first report has nothing to time from
    assert value(registry, training.STEP_SECONDS) == 0
    for seconds, step in [(1.0, 11), (3.0, 12), (2.0, 13), (8.0, 17)]:
        clock.now += seconds
        r.report(step, samples=8)
    # Per step: 1, 3, 2 and 8 / 4 = 2 s; the median is 2 s.
    assert value(registry, training.STEP_SECONDS) == 2.0
    assert value(registry, training.SAMPLES_PER_SECOND) == 32 / 14
    assert value(registry, training.STEP) == 17
    # A step that did not advance is not timed; the clock restarts from it.
    clock.now += 50
    r.report(17)
    clock.now += 2
    r.report(18, samples=8)
    assert value(registry, training.STEP_SECONDS) == 2.0
    assert value(registry, training.SAMPLES_PER_SECOND) == 40 / 16


def test_a_resume_sets_the_step_and_times_from_it() -> None:
    clock = Clock()
    r, registry = reporter(clock)
    clock.now += 600  # the load of a checkpoint is not a step
    r.resumed_at(500)
    assert (value(registry, training.RESUMED_STEP), value(registry, training.STEP)) == (500, 500)
    clock.now += 0.5
    r.report(501, samples=16)
    assert value(registry, training.STEP_SECONDS) == 0.5
    assert value(registry, training.SAMPLES_PER_SECOND) == 32


def test_checkpointing_is_one_until_the_outermost_block_ends() -> None:
    r, registry = reporter()
    assert value(registry, training.CHECKPOINTING) == 0
    with r.checkpointing():
        with r.checkpointing():
            assert value(registry, training.CHECKPOINTING) == 1
        assert value(registry, training.CHECKPOINTING) == 1
    assert value(registry, training.CHECKPOINTING) == 0
    with pytest.raises(OSError, match="disk full"), r.checkpointing():
        raise OSError("disk full")
    assert value(registry, training.CHECKPOINTING) == 0


@pytest.mark.parametrize(
    ("recent", "rate", "median"),
    [
        ([], None, 0.0),
        ([(32, 0.5, 1)], 64.0, 0.5),
        ([(32, 1.0, 1), (32, 3.0, 1)], 16.0, 2.0),
        ([(32, 1.0, 1), (96, 6.0, 3), (32, 9.0, 1)], 10.0, 2.0),
        ([(0, 1.0, 1), (0, 2.0, 1)], 0.0, 1.5),  # steps without samples: 0 samples/s
        ([(8, 0.0, 1)], None, 0.0),  # no time measured yet
    ],
)
def test_rate_and_median(
    recent: list[tuple[int, float, int]], rate: float | None, median: float
) -> None:
    assert progress.samples_per_second(recent) == rate
    assert progress.median_step_seconds(recent) == median


def test_window_keeps_the_last_steps_only() -> None:
    r, registry = reporter()
    r.record(1000, 100.0)  # a slow first step, pushed out of the window
    for _ in range(progress.WINDOW):
        r.record(10, 0.5)
    assert value(registry, training.STEP_SECONDS) == 0.5
    assert value(registry, training.SAMPLES_PER_SECOND) == 20.0


def served_names(registry: CollectorRegistry) -> set[str]:
    return {
        sample.name
        for family in registry.collect()
        for sample in family.samples
        if sample.labels == {"job": "j", "rank": "3"}
    }


def test_the_operator_reads_exactly_the_gauges_served() -> None:
    assert progress.GAUGES == training.GAUGES
    # The helper serves them and nothing else; the trainer serves them beside its own
    # metrics (once: a name registered twice in one registry would raise).
    assert served_names(reporter()[1]) == set(training.GAUGES)
    assert served_names(metrics.TrainerMetrics("j", 3).registry) >= set(training.GAUGES)


def test_the_trainer_times_an_optimizer_step_over_its_accumulated_batches() -> None:
    trainer = metrics.TrainerMetrics("j", 3)
    trainer.observe_step(8, 0.1, 0.4, 1.0, optimizer_step=False)
    trainer.observe_step(8, 0.1, 0.4, 1.0, optimizer_step=True)
    trainer.observe_step(8, 0.0, 3.0, 1.0, optimizer_step=True)
    # Steps of 1 s (two batches) and 3 s: median 2 s, 24 samples in 4 s.
    assert value(trainer.registry, training.STEP_SECONDS) == 2.0
    assert value(trainer.registry, training.SAMPLES_PER_SECOND) == 6.0


def test_imports_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from multigpu_train import progress\n"
        "progress.report(1, samples=2)\n"
        "assert 'torch' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_documented_plain_route_serves_what_the_operator_reads() -> None:
    """docs/training.md's snippet for images without our package, run as written in a
    process of its own (it serves from prometheus_client's default registry)."""
    doc = (Path(__file__).resolve().parents[3] / "docs/training.md").read_text()
    after = doc.split("Without our package", 1)[1]
    snippet = after.split("```python\n", 1)[1].split("```", 1)[0]
    port = free_port()
    code = f"step = 12\n{snippet}\nprint('serving', flush=True)\nimport sys\nsys.stdin.read()\n"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": ":".join(sys.path),
        "MGJ_TRAINER_METRICS_PORT": str(port - 1),
        "LOCAL_RANK": "1",
        "RANK": "3",
        "MGJ_JOB_NAME": "plain",
    }
    with subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        try:
            line = proc.stdout.readline()
            assert line == "serving\n", line + proc.stdout.read()
            found = scrape(port)
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)
    assert set(found) == set(training.GAUGES)
    assert found[training.STEP] == {(("job", "plain"), ("rank", "3")): 12}


def test_the_message_left_on_exit_is_what_the_operator_reads() -> None:
    trainer, _ = reporter()
    trainer.report(230, total_steps=230, epoch=9)
    message = progress.final_message(*trainer.final())
    assert message == "Progress: step=230 total_steps=230 epoch=9"
    assert message.startswith(training.FINAL_PREFIX)
    assert training.parse_final(message) == training.FinalProgress(230, 230, 9)
    bare = progress.final_message(57, None, None)
    assert training.parse_final(bare) == training.FinalProgress(57)


@pytest.mark.parametrize(
    ("local_rank", "file_there", "written"),
    [("0", True, True), ("", True, True), ("1", True, False), ("0", False, False)],
    ids=["rank-0", "no-local-rank", "other-process", "outside-kubernetes"],
)
def test_the_last_progress_goes_into_the_termination_message_of_local_rank_0(
    tmp_path: Path, local_rank: str, file_there: bool, written: bool
) -> None:
    log = tmp_path / "termination-log"
    if file_there:
        log.write_text("")
    trainer, _ = reporter()
    trainer.report(12, total_steps=40)
    environ = {"LOCAL_RANK": local_rank, progress.TERMINATION_LOG_VARIABLE: str(log)}
    assert progress.write_final(trainer, environ) == written
    if file_there:
        assert log.read_text() == ("Progress: step=12 total_steps=40 epoch=0" if written else "")


@pytest.mark.parametrize(("step", "written"), [(40, True), (39, False)], ids=["done", "not-done"])
def test_a_scripts_process_leaves_it_at_exit_once_training_is_done(
    tmp_path: Path, step: int, written: bool
) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    process = progress.ProcessReporter({progress.TERMINATION_LOG_VARIABLE: str(log)})
    trainer, _ = reporter()
    process.install(trainer)
    trainer.report(step, total_steps=40)
    process.at_exit()
    assert bool(log.read_text()) == written

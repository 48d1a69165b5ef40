"""How far training has come, as the operator reads it: a few Prometheus gauges per process.

The operator shows a job's progress (``status.progress``, ``kubectl get mgj``) and finds
stalled ranks by reading these gauges from every training process's metrics port,
``MGJ_TRAINER_METRICS_PORT + LOCAL_RANK`` (the operator's policy/training.py names the same
gauges; docs/training.md lists them). Our entrypoints serve them through their own metrics
(metrics.py); a user's script serves them with the functions below::

    from multigpu_train import progress

    progress.resumed_at(step)                      # after loading a checkpoint
    progress.report(step, total_steps=n, epoch=e, samples=len(batch))
    with progress.checkpointing():
        save(...)

The first call starts the HTTP server, once per process and only when the variable is set
(not 0); a port that cannot be served is logged once and never fails training. This
module imports no torch, so a script may use it before (or without) torch.

The operator reads the gauges every 15 s, so a short job may end before it read any. When
training has ended (our entrypoints call ``finished()``; a script's process does at exit
once its step reached the total), the process of LOCAL_RANK 0 writes its last step, total
and epoch into the container's termination message (``/dev/termination-log``, or
``MGJ_TERMINATION_LOG``), which the kubelet keeps in the pod's status and the operator
reads for a finished job it read no progress of (policy/training.py).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, start_http_server

log = logging.getLogger(__name__)

# The gauges' names; the operator's policy/training.py reads exactly these.
STEP = "mgj_trainer_progress_step"
TOTAL_STEPS = "mgj_trainer_progress_total_steps"
EPOCH = "mgj_trainer_epoch"
SAMPLES_PER_SECOND = "mgj_trainer_samples_per_second"
STEP_SECONDS = "mgj_trainer_progress_step_seconds"
CHECKPOINTING = "mgj_trainer_progress_checkpointing"
RESUMED_STEP = "mgj_trainer_progress_resumed_step"
GAUGES = (STEP, TOTAL_STEPS, EPOCH, SAMPLES_PER_SECOND, STEP_SECONDS, CHECKPOINTING, RESUMED_STEP)
LABELS = ("job", "rank")
PORT_VARIABLE = "MGJ_TRAINER_METRICS_PORT"
# samples/s and the median step time cover this many recent reports: one slow step
# (a checkpoint, an evaluation) barely moves them.
WINDOW = 20
# The container's termination message (errors.py writes a set-up error there): the kubelet
# copies the file into the container's terminated state. The operator's policy/training.py
# reads FINAL_PREFIX lines back.
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_LOG_VARIABLE = "MGJ_TERMINATION_LOG"
FINAL_PREFIX = "Progress: "


class Reporter:
    """The progress gauges of one process, in ``registry``, labelled ``job`` and ``rank``.

    Step times come either from the wall time between two ``report`` calls (a user's
    script) or measured by the caller (``record``: our Trainer, which times its steps).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        job: str,
        rank: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        labels = {"job": job, "rank": str(rank)}
        self._registry, self._labels = registry, labels

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, registry=registry).labels(**labels)

        self.step = gauge(STEP, "Optimizer steps done by the job, those before a resume included")
        self.total_steps = gauge(TOTAL_STEPS, "Optimizer steps the job will run; 0: not known")
        self.epoch = gauge(EPOCH, "Epoch being trained (0-based)")
        self.samples_per_second = gauge(
            SAMPLES_PER_SECOND, f"This rank's training samples/s over its last {WINDOW} steps"
        )
        self.step_seconds = gauge(
            STEP_SECONDS,
            f"Median wall time of this rank's last {WINDOW} steps (data wait included)",
        )
        self.checkpointing_now = gauge(
            CHECKPOINTING, "1 while this rank writes, loads or waits for a checkpoint"
        )
        self.resumed_step = gauge(RESUMED_STEP, "The step this run resumed at; 0: started afresh")
        self._clock = clock
        self._lock = threading.Lock()
        # Per report: (samples, seconds, steps) of the steps it covered.
        self._recent: collections.deque[tuple[int, float, int]] = collections.deque(maxlen=WINDOW)
        self._last: tuple[int, float] | None = None  # (step, time) of the last report
        self._saving = 0  # checkpointing() blocks entered and not left

    def report(
        self,
        step: int,
        *,
        total_steps: int | None = None,
        epoch: int | None = None,
        samples: int | None = None,
    ) -> None:
        """``step`` optimizer steps are done (by the job, resumed ones included);
        ``samples``: those this process trained since its previous report."""
        now = self._clock()
        with self._lock:
            last, self._last = self._last, (step, now)
        self.step.set(step)
        if total_steps is not None:
            self.total_steps.set(total_steps)
        if epoch is not None:
            self.epoch.set(epoch)
        # The first report has no start to time from; a step that went back (another
        # run's count) starts timing afresh.
        if last is not None and step > last[0]:
            self.record(samples or 0, now - last[1], step - last[0])

    def record(self, samples: int, seconds: float, steps: int = 1) -> None:
        """``steps`` steps of ``samples`` samples took ``seconds`` in all."""
        with self._lock:
            self._recent.append((samples, seconds, steps))
            rate = samples_per_second(self._recent)
            median = median_step_seconds(self._recent)
        if rate is not None:
            self.samples_per_second.set(rate)
        self.step_seconds.set(median)

    def resumed_at(self, step: int) -> None:
        """This run continues a job that had done ``step`` steps (read from a checkpoint)."""
        with self._lock:
            self._last = (step, self._clock())
        self.resumed_step.set(step)
        self.step.set(step)

    def final(self) -> tuple[int, int | None, int | None]:
        """The step, total (None: not known) and epoch the gauges show now."""

        def value(name: str) -> int | None:
            found = self._registry.get_sample_value(name, self._labels)
            return None if found is None else int(found)

        return value(STEP) or 0, value(TOTAL_STEPS) or None, value(EPOCH)

    def done(self) -> bool:
        """Whether the step reached a known total."""
        step, total, _ = self.final()
        return total is not None and step >= total

    @contextlib.contextmanager
    def checkpointing(self) -> Iterator[None]:
        """The gauge is 1 inside the block, also when blocks nest or threads overlap."""
        with self._lock:
            self._saving += 1
            self.checkpointing_now.set(1)
        try:
            yield
        finally:
            with self._lock:
                self._saving -= 1
                if not self._saving:
                    self.checkpointing_now.set(0)


def samples_per_second(recent: collections.abc.Iterable[tuple[int, float, int]]) -> float | None:
    """Samples over seconds of the recent steps; None before any time was measured."""
    entries = list(recent)
    seconds = sum(s for _, s, _ in entries)
    return sum(n for n, _, _ in entries) / seconds if seconds > 0 else None


def median_step_seconds(recent: collections.abc.Iterable[tuple[int, float, int]]) -> float:
    """The median time of one step, a report of several steps counting as their mean."""
    per_step = [seconds / steps for _, seconds, steps in recent if steps > 0]
    return statistics.median(per_step) if per_step else 0.0


class ProcessReporter:
    """The one Reporter of a process: the one our trainer installed, else one made and
    served on first use from the environment (none where no port is set)."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self._environ = environ
        self._lock = threading.Lock()
        self._reporter: Reporter | None = None
        self._tried = False
        self._exit_registered = False

    def install(self, reporter: Reporter) -> None:
        """Use ``reporter``, already served (our trainer's metrics), from now on."""
        with self._lock:
            self._reporter, self._tried = reporter, True
            self._at_exit()

    def get(self) -> Reporter | None:
        with self._lock:
            if not self._tried:
                self._tried = True
                self._reporter = served_from(self._environ)
                if self._reporter is not None:
                    self._at_exit()
            return self._reporter

    def _at_exit(self) -> None:
        if not self._exit_registered:
            self._exit_registered = True
            atexit.register(self.at_exit)

    def current(self) -> Reporter | None:
        """The Reporter in use, without making one."""
        with self._lock:
            return self._reporter

    def at_exit(self) -> None:
        """A script's process ends: its progress into the termination message if its
        training is done (a failed run's message stays the kubelet's)."""
        reporter = self.current()
        if reporter is not None and reporter.done():
            write_final(reporter, self._environ)


def final_message(step: int, total: int | None, epoch: int | None) -> str:
    """The termination message of a process whose training ended, e.g.
    "Progress: step=120 total_steps=120 epoch=9"."""
    parts = [f"step={step}"]
    parts += [f"total_steps={total}"] if total else []
    parts += [f"epoch={epoch}"] if epoch is not None else []
    return FINAL_PREFIX + " ".join(parts)


def write_final(reporter: Reporter, environ: Mapping[str, str] = os.environ) -> bool:
    """``reporter``'s last progress into the container's termination message, from the
    process of LOCAL_RANK 0 (one writer per container); False where there is no such file
    (outside Kubernetes) or this is another process."""
    if (environ.get("LOCAL_RANK") or "0").strip() != "0":
        return False
    path = Path(environ.get(TERMINATION_LOG_VARIABLE) or TERMINATION_LOG)
    if not path.is_file():  # Kubernetes creates it; elsewhere there is none to fill
        return False
    try:
        path.write_text(final_message(*reporter.final()))
    except OSError:
        return False
    return True


def served_from(environ: Mapping[str, str]) -> Reporter | None:
    """A Reporter served on MGJ_TRAINER_METRICS_PORT + LOCAL_RANK; None when the port is
    unset or 0, or cannot be served (a warning says why: training goes on without it)."""
    raw = environ.get(PORT_VARIABLE, "").strip()
    try:
        base = int(raw or "0")
        local_rank = int(environ.get("LOCAL_RANK") or "0")
        rank = int(environ.get("RANK") or "0")
    except ValueError as err:
        log.warning("progress not served: %s", err)
        return None
    if not base:
        return None
    registry = CollectorRegistry()
    reporter = Reporter(registry, environ.get("MGJ_JOB_NAME") or "local", rank)
    port = base + local_rank
    try:
        start_http_server(port, registry=registry)
    except OSError as err:
        log.warning(
            "progress not served on port %d (%s=%d + LOCAL_RANK=%d): %s",
            port,
            PORT_VARIABLE,
            base,
            local_rank,
            err,
        )
        return None
    log.info("progress on :%d/metrics", port)
    return reporter


_process = ProcessReporter()


def install(reporter: Reporter) -> None:
    """Make ``reporter`` this process's (our trainer does, so a script's calls reach its
    server rather than start another)."""
    _process.install(reporter)


def finished() -> None:
    """Training ended well: the last step, total and epoch into the container's
    termination message, where the operator finds them for a job that ended before it
    read them (our entrypoints call it before they exit)."""
    reporter = _process.current()
    if reporter is not None:
        write_final(reporter)


def report(
    step: int,
    *,
    total_steps: int | None = None,
    epoch: int | None = None,
    samples: int | None = None,
) -> None:
    """Say that ``step`` optimizer steps of the job are done (call it after each step, or
    every few): ``total_steps`` when known, the 0-based ``epoch``, and ``samples`` this
    process trained since its previous call. Nothing happens where no port is set."""
    reporter = _process.get()
    if reporter is not None:
        reporter.report(step, total_steps=total_steps, epoch=epoch, samples=samples)


def resumed_at(step: int) -> None:
    """Say that this run resumed from a checkpoint taken after ``step`` steps."""
    reporter = _process.get()
    if reporter is not None:
        reporter.resumed_at(step)


@contextlib.contextmanager
def checkpointing() -> Iterator[None]:
    """Wrap a checkpoint's write or load (and any wait for another rank's): a stall
    watchdog waits for it instead of taking the rank for hung."""
    reporter = _process.get()
    if reporter is None:
        yield
        return
    with reporter.checkpointing():
        yield

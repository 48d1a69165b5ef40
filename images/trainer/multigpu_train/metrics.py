"""Per-rank Prometheus metrics, served on MGJ_TRAINER_METRICS_PORT + LOCAL_RANK.

Every metric carries the labels ``job`` (MGJ_JOB_NAME) and ``rank`` (global rank).
docs/training.md lists them; keep it in step with this module.
"""

from __future__ import annotations

import logging
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from multigpu_train import progress
from multigpu_train.errors import SetupError

log = logging.getLogger(__name__)

PREFIX = "mgj_trainer_"
LABELS = ("job", "rank")
# Step times from milliseconds (small models on GPUs) to tens of seconds.
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class TrainerMetrics:
    def __init__(self, job: str, rank: int, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        labels = {"job": job, "rank": str(rank)}

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(PREFIX + name, doc, LABELS, registry=self.registry)

        def histogram(name: str, doc: str) -> Histogram:
            return Histogram(
                PREFIX + name, doc, LABELS, buckets=STEP_BUCKETS, registry=self.registry
            )

        self.samples = Counter(
            PREFIX + "samples",
            "Training samples processed by this rank",
            LABELS,
            registry=self.registry,
        ).labels(**labels)
        # The gauges the operator reads for the job's progress, epoch and samples/s among
        # them; the Trainer counts the steps, this times them.
        self.progress = progress.Reporter(self.registry, job, rank)
        self.samples_per_second = self.progress.samples_per_second
        self.epoch = self.progress.epoch
        self.step_seconds = histogram(
            "step_seconds", "Compute time of a step: forward, backward, optimizer; no data wait"
        ).labels(**labels)
        self.data_seconds = histogram(
            "data_seconds", "Time a step waited for its batch (loading and host-to-device copy)"
        ).labels(**labels)
        self.loss = gauge("loss", "Training loss of the last step").labels(**labels)
        self.world_size = gauge("world_size", "Processes in the job's current group").labels(
            **labels
        )
        self.restarts = gauge(
            "restarts", "Times torchrun restarted the worker group (TORCHELASTIC_RESTART_COUNT)"
        ).labels(**labels)
        self.last_checkpoint = gauge(
            "last_checkpoint_timestamp_seconds",
            "Unix time of the last checkpoint written (rank 0) or loaded",
        ).labels(**labels)
        self.test_accuracy = gauge(
            "test_accuracy", "Accuracy on the test split at the end of training"
        ).labels(**labels)
        # Samples and seconds of the batches since the last optimizer step.
        self._pending = (0, 0.0)

    def observe_step(
        self,
        samples: int,
        data_seconds: float,
        step_seconds: float,
        loss: float | None,
        optimizer_step: bool = True,
    ) -> None:
        """One batch; ``optimizer_step`` when it ended an optimizer step (the batches
        accumulated before it time that step together)."""
        self.samples.inc(samples)
        self.data_seconds.observe(data_seconds)
        self.step_seconds.observe(step_seconds)
        if loss is not None:
            self.loss.set(loss)
        pending = (self._pending[0] + samples, self._pending[1] + data_seconds + step_seconds)
        if optimizer_step:
            self.progress.record(*pending)
            pending = (0, 0.0)
        self._pending = pending

    def checkpointed(self, when: float | None = None) -> None:
        self.last_checkpoint.set(time.time() if when is None else when)


def start(
    port_base: int, local_rank: int, job: str, rank: int, world_size: int, restarts: int
) -> TrainerMetrics:
    """Metrics for this rank; served over HTTP when ``port_base`` is not 0."""
    metrics = TrainerMetrics(job, rank)
    metrics.world_size.set(world_size)
    metrics.restarts.set(restarts)
    if port_base:
        # Several processes in one pod share its network: one port each.
        port = port_base + local_rank
        try:
            start_http_server(port, registry=metrics.registry)
        except OSError as err:
            raise SetupError(
                f"cannot serve metrics on port {port} (MGJ_TRAINER_METRICS_PORT={port_base} "
                f"+ LOCAL_RANK={local_rank}): {err}"
            ) from None
        log.info("metrics on :%d/metrics", port)
    # A script's own progress.report calls in this process reach these gauges.
    progress.install(metrics.progress)
    return metrics

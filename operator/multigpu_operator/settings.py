"""Operator settings, read once from the environment (set by the Deployment or flags)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from multigpu_operator.election.lease_rules import LeaseTimings

_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Settings:
    # Watch one namespace only; None watches the whole cluster.
    namespace: str | None = None
    metrics_port: int = 9090
    liveness_port: int = 8080
    # Concurrent reconciles (different jobs); one job is never reconciled twice at once.
    workers: int = 32
    # Connections to the API server for the operator's own requests: pods are created
    # this many at a time. Each open TLS connection holds ~300 KiB of buffers; 16 cost
    # the benchmark's 1,250 x 8 run 0.63x -> 0.40x of the bare client's jobs/s
    # (docs/benchmarks.md), so the default favours speed.
    api_connections: int = 64
    # The liveness probe fails when the pod watch has been silent this long.
    watch_stale_seconds: float = 600
    # A reconcile pass that raised (API server unavailable, RBAC missing) is retried
    # after this delay, doubled on each failure of the same job in a row up to the cap,
    # and reset by a pass that succeeds: a job that keeps failing costs one pass per cap,
    # while a brief outage heals within seconds. Watch events still reconcile at once.
    retry_base_seconds: float = 2
    retry_max_seconds: float = 60
    # Leader election: only the replica holding the Lease reconciles; the others keep
    # their caches warm and take over when it stops renewing. Off, every process
    # reconciles: run exactly one.
    leader_election: bool = True
    lease_name: str = "multigpu-operator"
    # The chart sets the release namespace; a process outside a cluster defaults to the
    # namespace it watches, or "default" when it watches them all.
    lease_namespace: str = "default"
    lease_timings: LeaseTimings = field(default_factory=LeaseTimings)

    def __post_init__(self) -> None:
        self.lease_timings.check()

    # Jobs labelled kueue.x-k8s.io/queue-name run only when Kueue admits them: auto (when
    # Kueue's Workload API is served at start-up), on, or off (cluster/kueue_jobs.py).
    kueue: str = "auto"
    # Status writes for job progress alone, over all jobs (controller/progress_board.py):
    # at the default, 30 running jobs each show progress within 15 s, and 1,000 jobs cost
    # the API server 2 writes/s.
    progress_writes_per_second: float = 2

    @classmethod
    def from_env(cls) -> Settings:
        """The settings the MGJ_* variables give; a variable not set keeps the default
        declared above (tests/unit/chart/test_settings_defaults.py holds the chart's values, the
        kustomize Deployment and the docs to the same defaults)."""
        env = os.environ
        default, timings = cls(), LeaseTimings()
        namespace = env.get("MGJ_NAMESPACE") or default.namespace
        return cls(
            namespace=namespace,
            metrics_port=int(env.get("MGJ_METRICS_PORT", default.metrics_port)),
            liveness_port=int(env.get("MGJ_LIVENESS_PORT", default.liveness_port)),
            workers=int(env.get("MGJ_WORKERS", default.workers)),
            api_connections=int(env.get("MGJ_API_CONNECTIONS", default.api_connections)),
            watch_stale_seconds=float(
                env.get("MGJ_WATCH_STALE_SECONDS", default.watch_stale_seconds)
            ),
            retry_base_seconds=float(env.get("MGJ_RETRY_BASE_SECONDS", default.retry_base_seconds)),
            retry_max_seconds=float(env.get("MGJ_RETRY_MAX_SECONDS", default.retry_max_seconds)),
            leader_election=_flag(env.get("MGJ_LEADER_ELECTION"), default.leader_election),
            lease_name=env.get("MGJ_LEASE_NAME") or default.lease_name,
            lease_namespace=env.get("MGJ_LEASE_NAMESPACE") or namespace or default.lease_namespace,
            progress_writes_per_second=float(
                env.get("MGJ_PROGRESS_WRITES_PER_SECOND", default.progress_writes_per_second)
            ),
            lease_timings=LeaseTimings(
                lease_duration=float(env.get("MGJ_LEASE_DURATION_SECONDS", timings.lease_duration)),
                renew_deadline=float(env.get("MGJ_RENEW_DEADLINE_SECONDS", timings.renew_deadline)),
                retry_period=float(env.get("MGJ_RETRY_PERIOD_SECONDS", timings.retry_period)),
            ),
            kueue=env.get("MGJ_KUEUE", default.kueue),
        )


def _flag(raw: str | None, default: bool) -> bool:
    return default if raw is None else raw.lower() not in _FALSE

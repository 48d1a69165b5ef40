"""Operator settings, read once from the environment (set by the Deployment or flags)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    # Watch one namespace only; None watches the whole cluster.
    namespace: str | None = None
    metrics_port: int = 9090
    liveness_port: int = 8080
    # Concurrent reconciles (different jobs); one job is never reconciled twice at once.
    workers: int = 32
    # The liveness probe fails when the pod watch has been silent this long.
    watch_stale_seconds: float = 600
    # A reconcile pass that raised (API server unavailable, RBAC missing) is retried
    # after this delay, doubled on each failure of the same job in a row up to the cap,
    # and reset by a pass that succeeds: a job that keeps failing costs one pass per cap,
    # while a brief outage heals within seconds. Watch events still reconcile at once.
    retry_base_seconds: float = 2
    retry_max_seconds: float = 60
    # Jobs labelled kueue.x-k8s.io/queue-name run only when Kueue admits them: auto (when
    # Kueue's Workload API is served at start-up), on, or off (cluster/kueue_jobs.py).
    kueue: str = "auto"

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            namespace=os.environ.get("MGJ_NAMESPACE") or None,
            metrics_port=int(os.environ.get("MGJ_METRICS_PORT", "9090")),
            liveness_port=int(os.environ.get("MGJ_LIVENESS_PORT", "8080")),
            workers=int(os.environ.get("MGJ_WORKERS", "32")),
            watch_stale_seconds=float(os.environ.get("MGJ_WATCH_STALE_SECONDS", "600")),
            retry_base_seconds=float(os.environ.get("MGJ_RETRY_BASE_SECONDS", "2")),
            retry_max_seconds=float(os.environ.get("MGJ_RETRY_MAX_SECONDS", "60")),
            kueue=os.environ.get("MGJ_KUEUE", "auto"),
        )

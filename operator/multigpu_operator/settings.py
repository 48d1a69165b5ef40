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

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            namespace=os.environ.get("MGJ_NAMESPACE") or None,
            metrics_port=int(os.environ.get("MGJ_METRICS_PORT", "9090")),
            liveness_port=int(os.environ.get("MGJ_LIVENESS_PORT", "8080")),
            workers=int(os.environ.get("MGJ_WORKERS", "32")),
            watch_stale_seconds=float(os.environ.get("MGJ_WATCH_STALE_SECONDS", "600")),
        )

"""kopf registrations: thin wrappers that hand everything to the Controller.

Run with: python -m multigpu_operator (see __main__.py).

Only watch-event handlers are used: kopf then writes nothing to the jobs (no
finalizers, no progress annotations), so a job can always be deleted even while
the operator is down, and GitOps tools see no drift.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

from multigpu_operator import metrics
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from multigpu_operator.cluster.api import Kube, connect
from multigpu_operator.controller import Controller
from multigpu_operator.settings import Settings

registry = kopf.OperatorRegistry()


@kopf.on.login(registry=registry)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    # A custom registry does not get kopf's default login handlers.
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup(registry=registry)
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = Settings.from_env()
    # The controller posts its own Events; kopf's per-handler ones would double the
    # API traffic, and its per-event INFO logs cost CPU at hundreds of jobs.
    settings.posting.enabled = False
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    api = await connect()
    controller = Controller(Kube(api), config)
    memo["api"] = api
    memo["controller"] = controller
    memo["settings"] = config
    metrics.register_state(lambda: list(controller.jobs.values()), controller.informer.all_pods)
    memo["metrics"] = await metrics.serve(config.metrics_port)
    await controller.start()


@kopf.on.cleanup(registry=registry)
async def stop(memo: kopf.Memo, **_: Any) -> None:
    await memo["controller"].stop()
    await memo["metrics"].cleanup()
    await memo["api"].close()


@kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
async def job_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    # async: no I/O here, and a sync handler would cost a hop to kopf's thread pool per event.
    memo["controller"].job_event(event["type"], event["object"])


@kopf.on.probe(id="podWatchAgeSeconds", registry=registry)
def pod_watch_alive(memo: kopf.Memo, **_: Any) -> float:
    """Fails the liveness endpoint when the pod watch has been silent too long."""
    controller: Controller = memo["controller"]
    age = time.monotonic() - controller.informer.last_heartbeat
    if age > memo["settings"].watch_stale_seconds:
        raise kopf.PermanentError(f"pod watch silent for {age:.0f}s")
    return round(age, 1)

"""kopf registrations: thin wrappers that hand everything to the Controller.

Run with: python -m multigpu_operator (see __main__.py).

Only watch-event handlers are used: kopf then writes nothing to the jobs (no
finalizers, no progress annotations), so a job can always be deleted even while
the operator is down, and GitOps tools see no drift.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web

from multigpu_operator import metrics
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from multigpu_operator.cluster.api import Kube, connect
from multigpu_operator.cluster.leases import Leases
from multigpu_operator.cluster.rest import Rest
from multigpu_operator.controller.workers import Controller
from multigpu_operator.election.elector import LeaderElector, campaign
from multigpu_operator.settings import Settings

log = logging.getLogger(__name__)
registry = kopf.OperatorRegistry()


@kopf.on.login(registry=registry)
def login(settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo | None:
    # A custom registry does not get kopf's default login handlers.
    return credentials(settings)


def credentials(settings: kopf.OperatorSettings) -> kopf.ConnectionInfo | None:
    """The service account in a pod, else the kubeconfig: kopf's own two logins."""
    return kopf.login_with_service_account(settings=settings) or kopf.login_with_kubeconfig(
        settings=settings
    )


@dataclass
class Stop:
    """How the operator stops itself: kopf's stop flag, and why it was set (the leader
    election failed on a bug: the process then exits non-zero, __main__.py)."""

    flag: asyncio.Event = field(default_factory=asyncio.Event)
    election_failed: bool = False


@dataclass
class Running:
    """The operator's parts, made by the start-up handler and read by the others. kopf's
    memo holds this one object (`memo.running`): the copies of the memo kopf makes per
    job share it."""

    settings: Settings
    api: Rest
    controller: Controller
    elector: LeaderElector | None
    metrics: web.AppRunner
    stop: Stop
    leading: bool = False
    election: asyncio.Task[None] | None = None

    def reconciling(self, leading: bool) -> None:
        self.leading = leading
        metrics.LEADER.set(int(leading))


def running(memo: kopf.Memo) -> Running:
    parts: Running = memo.running
    return parts


@kopf.on.startup(registry=registry)
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    config = Settings.from_env()
    # The controller posts its own Events; kopf's per-handler ones would double the
    # API traffic, and its per-event INFO logs cost CPU at hundreds of jobs.
    settings.posting.enabled = False
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # The operator's own requests go on kopf's credentials (a service account's token is
    # read again when the API server refuses it as expired).
    api = await connect(functools.partial(credentials, settings), config.api_connections)
    kube = Kube(api)
    controller = Controller(kube, config)
    elector = None
    if config.leader_election:
        # client-go's identity: a restarted process is a new candidate, never mistaken
        # for the one that held the Lease before it.
        identity = f"{socket.gethostname()}_{uuid.uuid4()}"
        leases = Leases(kube, config.lease_namespace, config.lease_name)
        elector = LeaderElector(leases, identity, config.lease_timings)
    server = await metrics.serve(
        config.metrics_port, functools.partial(readiness, controller, elector)
    )
    parts = Running(config, api, controller, elector, server, memo.get("stop") or Stop())
    memo.running = parts
    # Standbys serve empty job and pod gauges: a dashboard summing both replicas counts
    # every job once.
    metrics.register_state(
        lambda: list(controller.jobs.values()) if parts.leading else [],
        lambda: controller.informer.all_pods() if parts.leading else [],
    )
    # Caches start on every replica so that a standby takes over warm.
    await controller.start(reconcile=elector is None)
    if elector is None:
        parts.reconciling(True)
    else:
        parts.election = asyncio.create_task(run_for_leader(elector, parts), name="leader-election")


async def run_for_leader(elector: LeaderElector, parts: Running) -> None:
    """Lead while the Lease is ours, stand by otherwise, for as long as the process runs:
    an API server that is down or answers errors only delays the next try (election/elector.py).
    Only a bug in the election ends it: the operator then stops and exits non-zero."""

    async def stop_reconciling() -> None:
        await parts.controller.stop_workers()
        parts.reconciling(False)

    def start_reconciling() -> None:
        parts.controller.start_workers()
        parts.reconciling(True)

    try:
        await campaign(elector, start_reconciling, stop_reconciling)
    except Exception:
        log.exception("leader election failed")
        parts.stop.election_failed = True
        parts.stop.flag.set()


def readiness(controller: Controller, elector: LeaderElector | None) -> str | None:
    """Ready: the caches are synced and, under leader election, the API server answered
    about the Lease within its duration (a standby that can take over, or the leader)."""
    if not (controller.informer.synced.is_set() and controller.services.synced.is_set()):
        return "the pod and Service caches are not synced yet"
    if elector is None:
        return None
    age = elector.contact_age()
    if age is None:
        return "the Lease has not been read yet"
    if age > elector.timings.lease_duration:
        return f"no answer from the API server about the Lease for {age:.0f}s"
    return None


@kopf.on.cleanup(registry=registry)
async def stop(memo: kopf.Memo, **_: Any) -> None:
    # Stop renewing, stop reconciling, and only then hand the Lease over: a standby takes
    # it at its next try, while this replica can no longer act.
    parts = running(memo)
    if parts.election is not None:
        parts.election.cancel()
        await asyncio.gather(parts.election, return_exceptions=True)
    await parts.controller.stop()
    if parts.elector is not None:
        await parts.elector.release()
    await parts.metrics.cleanup()
    await parts.api.close()


@kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
async def job_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    # async: no I/O here, and a sync handler would cost a hop to kopf's thread pool per event.
    running(memo).controller.job_event(event["type"], event["object"])


@kopf.on.probe(id="podWatchAgeSeconds", registry=registry)
def pod_watch_alive(memo: kopf.Memo, **_: Any) -> float:
    return pod_watch_age(running(memo))


def pod_watch_age(parts: Running) -> float:
    """Fails the liveness endpoint when the pod watch loop has made no progress too long:
    no event, no (re)connect and no failed try. An API server that is down keeps the
    loop retrying, so the probe stays healthy: a restart would not bring it back."""
    age = parts.controller.informer.health_age()
    if age > parts.settings.watch_stale_seconds:
        raise kopf.PermanentError(f"pod watch silent for {age:.0f}s")
    return round(age, 1)


@kopf.on.probe(id="electionTryAgeSeconds", registry=registry)
def election_alive(memo: kopf.Memo, **_: Any) -> float | None:
    """Fails the liveness endpoint when the leader election has not tried for too long
    (each try ends within the renew deadline, answered or not): its loop is stuck."""
    parts = running(memo)
    if parts.elector is None:
        return None
    age = time.monotonic() - parts.elector.last_try
    if age > parts.settings.watch_stale_seconds:
        raise kopf.PermanentError(f"leader election has not tried for {age:.0f}s")
    return round(age, 1)

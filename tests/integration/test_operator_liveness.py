"""The liveness probe fails when the pod watch is stuck, and only then: an operator whose
API connections go through a proxy (tests/support/stall_proxy.py) stays live while pod
events flow, and fails its probe once the proxy stalls every connection (open, silent:
the watch waits on a read that never returns) for longer than MGJ_WATCH_STALE_SECONDS.

A stall only makes the watch stuck for as long as its client allows (the request's
timeout, about 5.5 minutes, ends it and the loop tries again, which counts as alive), so
the test sets the stale limit far below that, and keeps pod events coming before the
stall: a watch with nothing to say is silent too (the default limit, 600 s, is longer
than the watch's 300 s server timeout, after which the loop reconnects).
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cluster.localcluster import LocalCluster
from support.jobs import RUN_LONG, JobEnv, job_manifest
from support.operator_process import OperatorProcess
from support.stall_proxy import StallingProxy
from support.waiting import wait_for

STALE_SECONDS = 4.0
# kopf answers /healthz from its probes' results of up to 10 s ago.
PROBE_CACHE_SECONDS = 10.0


@pytest.fixture
def proxied(
    installed_crd: LocalCluster, namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[OperatorProcess, StallingProxy]]:
    config = yaml.safe_load(installed_crd.kubeconfig.read_text())
    server = urllib.parse.urlsplit(config["clusters"][0]["cluster"]["server"])
    assert server.hostname is not None
    assert server.port is not None
    proxy = StallingProxy((server.hostname, server.port))
    kubeconfig = proxy.kubeconfig(installed_crd.kubeconfig, tmp_path / "proxied.kubeconfig")
    env = {"MGJ_WATCH_STALE_SECONDS": str(STALE_SECONDS)}
    operator = OperatorProcess(kubeconfig, namespace, tmp_path / "operator.log", env)
    operator.start()
    yield operator, proxy
    proxy.stalled.clear()
    operator.stop()
    proxy.close()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(operator.log())


def live(operator: OperatorProcess) -> bool:
    """The liveness endpoint answers 200 (kopf answers 500 when a probe raises)."""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{operator.liveness_port}/healthz", timeout=5
        ) as resp:
            return bool(resp.status == 200)
    except urllib.error.HTTPError:
        return False


def test_the_liveness_probe_fails_when_the_pod_watch_is_stuck(
    proxied: tuple[OperatorProcess, StallingProxy], jobs: JobEnv
) -> None:
    operator, proxy = proxied
    jobs.apply(job_manifest("watched", replicas=1, annotations=RUN_LONG))
    (pod,) = wait_for(lambda: jobs.running("watched", 1), "the pod running", timeout=60)
    # Pod events keep coming: a touch of the pod every second, a watch event each.
    touching = threading.Event()

    def touch() -> None:
        n = 0
        while not touching.wait(1.0):
            n += 1
            jobs.annotate(pod.metadata.name, {"test.multigpu.dev/touch": str(n)})

    toucher = threading.Thread(target=touch, daemon=True)
    toucher.start()
    try:
        # Live across more than the stale limit and kopf's cache: the watch is not stuck.
        until = time.monotonic() + STALE_SECONDS + PROBE_CACHE_SECONDS + 1
        while time.monotonic() < until:
            assert live(operator), operator.log()
            time.sleep(0.5)
        proxy.stalled.set()
        wait_for(
            lambda: not live(operator),
            "the liveness probe to fail",
            timeout=STALE_SECONDS + PROBE_CACHE_SECONDS + 10,
        )
    finally:
        touching.set()
        toucher.join()
    assert operator.proc is not None
    assert operator.proc.poll() is None  # failing it is the kubelet's cue, not an exit
    assert "pod watch silent for" in operator.log()

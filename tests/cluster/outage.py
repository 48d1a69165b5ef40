"""Control-plane outages staged on a local cluster of a test's own (never the shared one):
the API server stopped and started again, the API server answering 503, etcd frozen.

kwokctl's binary runtime keeps each component's pid in clusters/<name>/pids/<component>.pid
and stops the cluster by those pids, so an API server started again here writes its new
pid there and `kwokctl delete cluster` still stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from cluster.localcluster import LocalCluster


def _pid_file(cluster: LocalCluster, component: str) -> Path:
    return cluster.kubeconfig.parent / "pids" / f"{component}.pid"


def component_pid(cluster: LocalCluster, component: str) -> int:
    return int(_pid_file(cluster, component).read_text().strip())


def _wait_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state == "Z":
            return
        time.sleep(0.1)
    raise TimeoutError(f"process {pid} still running after {timeout}s")


@contextlib.contextmanager
def api_server_stopped(cluster: LocalCluster) -> Iterator[None]:
    """The API server stopped (SIGTERM, then SIGKILL after 5 s: its graceful shutdown waits
    for open watches for up to a minute) and, on leaving, started again
    with the same command line, environment and directory, then answering /readyz."""
    pid = component_pid(cluster, "kube-apiserver")
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    env = dict(
        item.split(b"=", 1)
        for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if b"=" in item
    )
    cwd = os.readlink(f"/proc/{pid}/cwd")
    os.kill(pid, signal.SIGTERM)
    try:
        _wait_gone(pid, 5)
    except TimeoutError:
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
    try:
        yield
    finally:
        log = cluster.component_log("kube-apiserver")
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _pid_file(cluster, "kube-apiserver").write_text(str(proc.pid))
        deadline = time.monotonic() + 60
        while not cluster.is_api_up():
            if time.monotonic() > deadline:
                raise TimeoutError("the API server did not come back within 60s")
            time.sleep(0.2)


@contextlib.contextmanager
def frozen(cluster: LocalCluster, component: str) -> Iterator[None]:
    """`component` stopped in its tracks (SIGSTOP) and resumed (SIGCONT) on leaving: its
    connections stay open and nothing answers, as a hung disk or a partition does."""
    pid = component_pid(cluster, component)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


# The Lease API, served by kube-apiserver itself ("Local" APIService).
LEASE_API = "apiservice/v1.coordination.k8s.io"


@contextlib.contextmanager
def lease_api_unavailable(cluster: LocalCluster) -> Iterator[None]:
    """The API server answers 503 to every Lease request: the Lease API's APIService is
    pointed at a Service with no endpoints, and kube-apiserver's aggregator answers each
    request of that group "503 service unavailable", as it does for any aggregated API
    whose backend is down. The rest of the API keeps answering."""
    service = {"namespace": "default", "name": "no-lease-backend", "port": 443}
    patch = {"spec": {"service": service, "insecureSkipTLSVerify": True}}
    cluster.kubectl("patch", LEASE_API, "--type=merge", "-p", json.dumps(patch))
    try:
        _wait_lease_status(cluster, 503)
        yield
    finally:
        local = {"spec": {"service": None, "insecureSkipTLSVerify": False}}
        cluster.kubectl("patch", LEASE_API, "--type=merge", "-p", json.dumps(local))
        _wait_lease_status(cluster, 200)


def _wait_lease_status(cluster: LocalCluster, code: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    while time.monotonic() < deadline:
        got = cluster.kubectl("get", "--raw", path, check=False)
        # kubectl names the Status reason of the answer in parentheses.
        unavailable = "(ServiceUnavailable)" in got.stderr
        answered = 200 if got.returncode == 0 else (503 if unavailable else 0)
        if answered == code:
            return
        time.sleep(0.2)
    raise TimeoutError(f"the Lease API did not answer {code} within {timeout}s")

"""An HTTP server that answers the client and `mgj` as the API server would, reached
through a kubeconfig file as a user's would be (tests/unit/test_client.py,
tests/unit/test_mgj_commands.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

JOBS = "/apis/multigpu.dev/v1alpha1/namespaces/{ns}/multigpujobs"
PODS = "/api/v1/namespaces/{ns}/pods"
EVENTS = "/api/v1/namespaces/{ns}/events"
MANIFEST = """\
apiVersion: multigpu.dev/v1alpha1
kind: MultiGPUJob
metadata: {name: train}
spec: {replicas: 2}
"""


def pod(index: int, attempt: int = 1, node: str = "node-a") -> dict[str, Any]:
    labels = {
        "multigpu.dev/job-name": "train",
        "multigpu.dev/replica-index": str(index),
        "multigpu.dev/attempt": str(attempt),
    }
    return {
        "metadata": {"name": f"train-{index}", "uid": f"{index}-{attempt}", "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "trainer"}]},
        "status": {"phase": "Running"},
    }


@dataclass
class ApiServer:
    """Jobs of namespace `team`; a job's phase moves along `phases`, one per read."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    phases: list[str] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)
    queries: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    # Reads of a deleted job that still find it (its pods are deleted first).
    reads_while_deleting: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.queries.append((request.method, request.path, dict(request.query)))
        jobs, pods = JOBS.format(ns="team"), PODS.format(ns="team")
        if request.path == jobs and request.method == "POST":
            body = await request.json()
            if "replicas" not in body["spec"]:
                message = 'MultiGPUJob.multigpu.dev "train" is invalid: spec.replicas: Required'
                return web.json_response({"message": message}, status=422)
            stored = {**body, "metadata": {**body["metadata"], "namespace": "team"}}
            self.jobs[body["metadata"]["name"]] = stored
            return web.json_response(stored, status=201)
        if request.path == jobs:
            meta = {"resourceVersion": "1"}
            return web.json_response({"items": list(self.jobs.values()), "metadata": meta})
        if request.path.startswith(jobs + "/"):
            name = request.path.removeprefix(jobs + "/")
            if name not in self.jobs:
                return web.json_response({"message": "not found"}, status=404)
            if request.method == "DELETE" or "deletionTimestamp" in self.jobs[name]["metadata"]:
                self.jobs[name]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                if self.reads_while_deleting <= 0:
                    return web.json_response(self.jobs.pop(name))
                self.reads_while_deleting -= request.method == "GET"
                return web.json_response(self.jobs[name])
            if self.phases:
                self.jobs[name]["status"] = {"phase": self.phases.pop(0), "attempt": 1}
            return web.json_response(self.jobs[name])
        if request.path == pods:
            return web.json_response({"items": self.pods, "metadata": {"resourceVersion": "1"}})
        if request.path == EVENTS.format(ns="team"):
            return web.json_response({"items": self.events})
        if request.path.startswith(pods + "/"):
            name = request.path.removeprefix(pods + "/").removesuffix("/log")
            return web.Response(body="".join(f"{line}\n" for line in self.logs[name]).encode())
        return web.json_response({"message": "not found"}, status=404)


@contextmanager
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    """The server in a thread of its own (the blocking client runs event loops of its
    own), and a kubeconfig whose context's namespace is `team`, as $KUBECONFIG."""
    server = ApiServer()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
        "current-context": "x",
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setattr("multigpu_operator.client.aio.POLL_S", 0.01)
    yield server
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)

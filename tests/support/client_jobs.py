"""The client's and `mgj`'s tests (tests/unit/user/test_client.py, test_mgj_commands.py,
test_pod_logs.py) on the operator's in-memory API server (support/fake_cluster.py): a
kubeconfig whose context's namespace is `team`, as a user's would be, and the world as
the operator and the kubelet leave it (a job's phase moving between reads, its pods,
their logs, its Events, a finalizer holding it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator.cluster.kinds import EVENTS, JOBS, PODS
from support.fake_cluster import FakeCluster

NAMESPACE = "team"
MANIFEST = """\
apiVersion: multigpu.dev/v1alpha1
kind: MultiGPUJob
metadata: {name: train}
spec: {replicas: 2}
"""


def pod(
    index: int,
    attempt: int = 1,
    node: str = "node-a",
    containers: tuple[str, ...] = ("trainer",),
    phase: str = "Running",
) -> dict[str, Any]:
    """Replica `index` of job `train`, made by `attempt`, on `node`."""
    labels = {
        "multigpu.dev/job-name": "train",
        "multigpu.dev/replica-index": str(index),
        "multigpu.dev/attempt": str(attempt),
    }
    meta = {"name": f"train-{index}", "namespace": NAMESPACE, "labels": labels}
    return {
        "metadata": {**meta, "uid": f"{index}-{attempt}"},
        "spec": {"nodeName": node, "containers": [{"name": c} for c in containers]},
        "status": {"phase": phase},
    }


def put_job(
    fake: FakeCluster,
    name: str = "train",
    status: dict[str, Any] | None = None,
    finalizers: list[str] | None = None,
) -> None:
    """The job as the API server holds it (kubectl apply, the operator's status)."""
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if finalizers:
        meta["finalizers"] = finalizers
    job = {"apiVersion": "multigpu.dev/v1alpha1", "kind": "MultiGPUJob", "metadata": meta}
    fake.put(JOBS, {**job, "spec": {}, **({"status": status} if status else {})})


def set_status(fake: FakeCluster, name: str, status: dict[str, Any]) -> None:
    fake.put(JOBS, {**fake.jobs[NAMESPACE, name], "status": status})


def phases(fake: FakeCluster, phases: list[str], name: str = "train") -> None:
    """The job's phase moves along `phases`, one per read of a job: the operator at work
    between the user's reads."""

    def step(phase: str) -> Any:
        return lambda: set_status(fake, name, {"phase": phase, "attempt": 1})

    fake.before("get multigpujobs", *(step(p) for p in phases))


def put_pods(fake: FakeCluster, *pods: dict[str, Any]) -> None:
    for each in pods:
        fake.put(PODS, each)


def put_logs(fake: FakeCluster, logs: dict[str, list[str]]) -> None:
    """The kubelet's logs of the pods' containers, by pod name."""
    fake.logs.update({(NAMESPACE, name): lines for name, lines in logs.items()})


def put_event(fake: FakeCluster, about: str, type_: str, reason: str, note: str) -> None:
    """An Event about the job, as the operator posts it (events.k8s.io/v1)."""
    regarding = {"kind": "MultiGPUJob", "name": about, "namespace": NAMESPACE}
    name = f"{about}.{len(fake.objects[EVENTS])}"
    meta = {"name": name, "namespace": NAMESPACE}
    event = {"metadata": meta, "regarding": regarding, "type": type_, "reason": reason}
    fake.put(EVENTS, {**event, "note": note, "eventTime": "2026-11-22T10:00:00.000000Z"})


def job_names(fake: FakeCluster) -> set[str]:
    return {name for _, name in fake.jobs}


def user_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    """The in-memory API server, and a kubeconfig whose context's namespace is `team`,
    as $KUBECONFIG (nothing connects to its server); `wait` polls at once."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": NAMESPACE}}
        ],
        "current-context": "x",
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setattr("multigpu_operator.client.aio.POLL_S", 0.01)
    return FakeCluster()

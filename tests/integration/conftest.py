"""Fixtures for tests against the local control plane.

Each cluster is started once per session, when a module first needs it (or a running one
is reused), and stopped at the end if this session started it: the shared one, and under
xdist the simulated one of support/suite_scopes.py's SIMULATED modules. A build or start
failure is an ERROR, never a skip: integration tests must not pass by not running.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from cluster.localcluster import TEST_NAME, LocalCluster
from cluster.tools import build_tools
from support.events import list_events
from support.jobs import JobEnv
from support.operator_process import OperatorProcess
from support.suite_scopes import cluster_name

REPO = Path(__file__).resolve().parents[2]


class Clusters:
    """The clusters this session's modules run on (support/suite_scopes.py): each started
    (or a running one reused) on first use, with the CRD installed once."""

    def __init__(self) -> None:
        self.ready: dict[str, LocalCluster] = {}
        self.started: list[LocalCluster] = []

    def get(self, name: str) -> LocalCluster:
        if name not in self.ready:
            cluster = LocalCluster(build_tools(), name)
            if not cluster.is_healthy():
                self.started.append(cluster)
            # MGJ_NO_REAL_NODE=1: simulated nodes only, for working on other tests on a
            # machine whose real node (and its several-GB images) another cluster has.
            real_node = name == TEST_NAME and os.environ.get("MGJ_NO_REAL_NODE") != "1"
            cluster.up(real_node=real_node)
            cluster.install_crds(REPO / "manifests/crd")  # waits until Established
            self.ready[name] = cluster
        return self.ready[name]


@pytest.fixture(scope="session")
def clusters() -> Iterator[Clusters]:
    pool = Clusters()
    yield pool
    if not os.environ.get("MGJ_KEEP_CLUSTER"):
        for cluster in pool.started:
            cluster.down()


@pytest.fixture(scope="module")
def local_cluster(request: pytest.FixtureRequest, clusters: Clusters) -> LocalCluster:
    """The cluster this module runs on, with the MultiGPUJob CRD Established."""
    return clusters.get(cluster_name(request.config, request.node.nodeid))


@pytest.fixture(scope="module")
def api_client(local_cluster: LocalCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(local_cluster.kubeconfig))


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(request: pytest.FixtureRequest, core: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (without waiting for it)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{slug}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def installed_crd(local_cluster: LocalCluster) -> LocalCluster:
    """The cluster, named for what the test needs of it: the CRD applied and Established."""
    return local_cluster


@pytest.fixture
def operator(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[OperatorProcess]:
    """The operator as a real process, watching only this test's namespace."""
    proc = OperatorProcess(installed_crd.kubeconfig, namespace, tmp_path / "operator.log")
    proc.start()
    yield proc
    proc.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        # Events last: CI shows the end of the output, and they tell the story briefly.
        print(f"--- operator log ({namespace}) ---\n{proc.log()}")
        print(f"--- events ({namespace}) ---")
        for event in sorted(list_events(api_client, namespace), key=_event_time):
            regarding = event.get("regarding", {})
            print(
                _event_time(event),
                event.get("type"),
                event.get("reason"),
                f"{regarding.get('kind')}/{regarding.get('name')}",
                event.get("note", ""),
            )


def _event_time(event: dict[str, Any]) -> str:
    meta = event.get("metadata", {})
    return str(
        event.get("eventTime")
        or event.get("deprecatedLastTimestamp")
        or meta.get("creationTimestamp", "")
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # Lets fixtures see whether the test body failed (to print the operator's log).
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def jobs(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> JobEnv:
    """This test's namespace, with the CRD installed, for applying and watching jobs."""
    return JobEnv(installed_crd, api_client, core, namespace)

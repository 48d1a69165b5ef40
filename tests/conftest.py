"""Session-wide hooks.

- The tools that only a few tests need (build_tools's LATE_TOOLS) compile in the
  background while the other tests run, and the tests that start Prometheus, then those
  that start Kueue, run last, so a cold session does not wait for a build that other tests
  could overlap.
- Under pytest-xdist (`make test` runs `-n 2`) every test of the local
  cluster goes to one worker, one after another as without xdist (they share one control
  plane, its GPUs and its real node), while the other worker runs the unit and training
  tests, which need no cluster: the cluster tests mostly wait, the others mostly compute.
  Then that worker runs the modules of a second cluster with simulated nodes only
  (SIMULATED) and those that start a control plane of their own (INDEPENDENT).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import pytest

from cluster.tools import LATE_TOOLS, cache_dir, start_late_build
from support.suite_scopes import independent, scope_of, simulated, xdist_worker

LATE_BUILD = pytest.StashKey[subprocess.Popen[bytes]]()
# Tests marked with these tools go last, in this order (build-tools.sh builds them in the
# same order): the longest builds have the most time. Kueue's is the longest.
LAST = ("prometheus-operator", "kueue")


def late_tools(item: pytest.Item) -> set[str]:
    return {tool for mark in item.iter_markers("uses_tools") for tool in mark.args}


def xdist_controller(config: pytest.Config) -> bool:
    """The process that hands tests to xdist's workers (it collects none itself)."""
    return bool(getattr(config.option, "numprocesses", None)) and not xdist_worker(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The simulated cluster's modules, then the independent ones, last: under xdist the
    # free worker reaches them once the unit and training tests are done, not while the
    # shared cluster starts.
    def rank(item: pytest.Item) -> int:
        return 2 if independent(item.nodeid) else 1 if simulated(item.nodeid) else 0

    items.sort(key=rank)  # stable: collection order within each
    for tool in LAST:
        last = [item for item in items if tool in late_tools(item)]
        if last:
            ids = {id(item) for item in last}
            items[:] = [item for item in items if id(item) not in ids] + last


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling with every test of one cluster in one scope
    (support/suite_scopes.py): one worker runs the shared cluster's in collection order,
    the other takes the rest test by test, then the simulated cluster's and each
    independent module. Scopes go out in collection order, not largest first, so those
    come last. (xdist's own loadgroup marks do not group under pytest 9, whose node ids it
    can no longer rewrite.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ClusterTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False
    return ClusterTestsTogether(config, log)


def start_build(session: pytest.Session, tools: list[str]) -> None:
    cache_dir().mkdir(parents=True, exist_ok=True)
    log = cache_dir() / "late-tools.log"
    session.config.stash[LATE_BUILD] = start_late_build(tools, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    # xdist's workers collect, not this process: it starts every late tool's build (a
    # no-op once they are cached) and ends it with the session.
    if xdist_controller(session.config) and not session.config.option.collectonly:
        start_build(session, list(LATE_TOOLS))


def pytest_collection_finish(session: pytest.Session) -> None:
    wanted = sorted({tool for item in session.items for tool in late_tools(item)})
    unknown = set(wanted) - set(LATE_TOOLS)
    if unknown:
        raise pytest.UsageError(f"uses_tools names unknown tools {sorted(unknown)}")
    config = session.config
    if wanted and not config.option.collectonly and not xdist_worker(config):
        start_build(session, wanted)


def pytest_sessionfinish(session: pytest.Session) -> None:
    build = session.config.stash.get(LATE_BUILD, None)
    if build is not None and build.poll() is None:
        # The session ended before a test needed it (-x, -k): stop it with its go children.
        os.killpg(build.pid, signal.SIGTERM)
        build.wait()

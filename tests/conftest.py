"""Session-wide hooks: the tools that only a few tests need (build_tools's LATE_TOOLS)
compile in the background while the other tests run, and the tests that start Kueue run
last, so a cold session does not wait for a build that other tests could overlap."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from cluster.tools import LATE_TOOLS, cache_dir, start_late_build

LATE_BUILD = pytest.StashKey[subprocess.Popen[bytes]]()
# Tests marked so start Kueue: they go last, the longest build has the most time.
LAST = "kueue"


def late_tools(item: pytest.Item) -> set[str]:
    return {tool for mark in item.iter_markers("uses_tools") for tool in mark.args}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    last = [item for item in items if LAST in late_tools(item)]
    if last:
        ids = {id(item) for item in last}
        items[:] = [item for item in items if id(item) not in ids] + last


def pytest_collection_finish(session: pytest.Session) -> None:
    wanted = sorted({tool for item in session.items for tool in late_tools(item)})
    unknown = set(wanted) - set(LATE_TOOLS)
    if unknown:
        raise pytest.UsageError(f"uses_tools names unknown tools {sorted(unknown)}")
    if wanted and not session.config.option.collectonly:
        cache_dir().mkdir(parents=True, exist_ok=True)
        log = cache_dir() / "late-tools.log"
        session.config.stash[LATE_BUILD] = start_late_build(wanted, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    build = session.config.stash.get(LATE_BUILD, None)
    if build is not None and build.poll() is None:
        # The session ended before a test needed it (-x, -k): stop it with its go children.
        os.killpg(build.pid, signal.SIGTERM)
        build.wait()

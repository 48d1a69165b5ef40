"""The pod watch's liveness probe (handlers.py): the pod reflector's health age against
MGJ_WATCH_STALE_SECONDS, read from the operator's parts that kopf's memo holds."""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest

from multigpu_operator import handlers
from multigpu_operator.settings import Settings
from support.controller_run import running_controller
from support.fake_cluster import FakeCluster


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("stale_seconds", "alive"),
    [pytest.param(600, True, id="within-the-limit"), pytest.param(0, False, id="past-it")],
)
async def test_the_pod_watch_probe_fails_once_the_watch_is_silent_too_long(
    stale_seconds: float, alive: bool
) -> None:
    async with running_controller(FakeCluster()) as controller:
        await controller.informer.synced.wait()
        parts = handlers.Running(
            settings=Settings(watch_stale_seconds=stale_seconds),
            api=cast(Any, None),
            controller=controller,
            elector=None,
            metrics=cast(Any, None),
            stop=handlers.Stop(),
        )
        assert handlers.running(kopf.Memo(running=parts)) is parts
        if alive:
            assert 0 <= handlers.pod_watch_age(parts) < stale_seconds
        else:
            with pytest.raises(kopf.PermanentError, match="pod watch silent for"):
                handlers.pod_watch_age(parts)

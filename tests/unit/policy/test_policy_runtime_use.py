"""A job's runtime in one pass (policy/runtime_use.py): which copy is merged, the job that
waits for a runtime not there yet, and the copy recorded before any pod."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from multigpu_operator.api.runtime_ref import RuntimeRef, RuntimeSnapshot
from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.policy.runtime_use import (
    RUNTIME_NOT_FOUND,
    RuntimeUse,
    merged_body,
    runtime_ref,
    runtime_use,
    variant,
    waiting_for_runtime,
    with_runtime_recorded,
)
from multigpu_operator.policy.step import Decision

NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
REF = RuntimeRef(name="gpu-ddp")
COPY = RuntimeSnapshot(kind=REF.kind, name="gpu-ddp", generation=1, spec={"mode": "Elastic"})
FOUND = {"metadata": {"name": "gpu-ddp", "generation": 4}, "spec": {"mode": "DataParallel"}}


@pytest.mark.parametrize(
    ("previous", "found", "spec", "new"),
    [
        (JobStatus(), FOUND, {"mode": "DataParallel"}, True),  # first pass: the runtime now
        (JobStatus(runtime=COPY), FOUND, {"mode": "Elastic"}, False),  # then the copy
        (JobStatus(runtime=COPY), None, {"mode": "Elastic"}, False),  # runtime deleted
        (JobStatus(), None, None, False),  # not there yet: waits
    ],
)
def test_the_copy_in_the_status_wins_over_the_runtime_now(
    previous: JobStatus, found: dict[str, Any] | None, spec: dict[str, Any] | None, new: bool
) -> None:
    use = runtime_use(REF, previous, found)
    assert (use.snapshot.spec if use.snapshot else None, use.new) == (spec, new)


def test_a_copy_of_another_runtime_is_not_used() -> None:
    other = COPY.model_copy(update={"name": "cpu-ddp"})
    use = runtime_use(REF, JobStatus(runtime=other), FOUND)
    assert use.new
    assert use.snapshot is not None
    assert use.snapshot.name == "gpu-ddp"


def test_the_ref_is_read_from_the_stored_job() -> None:
    assert runtime_ref({"spec": {"runtimeRef": {"name": "x"}}}) == RuntimeRef(name="x")
    assert runtime_ref({"spec": {}}) is None
    assert runtime_ref({"spec": {"runtimeRef": {"kind": "Nope", "name": "x"}}}) is None


def test_the_plan_cache_tells_copies_apart() -> None:
    assert variant(None) == variant(RuntimeUse(REF, None)) == ""
    assert variant(runtime_use(REF, JobStatus(), FOUND)) == "ClusterMultiGPURuntime gpu-ddp@4"


def test_waiting_says_which_runtime_and_creates_nothing() -> None:
    decision = waiting_for_runtime(JobStatus(), 1, NOW, RuntimeUse(REF, None))
    created = decision.status.condition("Created")
    assert created is not None
    assert (created.status, created.reason) == ("False", RUNTIME_NOT_FOUND)
    assert created.message is not None
    assert "ClusterMultiGPURuntime gpu-ddp" in created.message
    assert (decision.status.phase, decision.only_status, decision.create_pods) == (
        Phase.PENDING,
        True,
        (),
    )
    assert [e.reason for e in decision.events] == [RUNTIME_NOT_FOUND]
    # Said once: the next pass adds no event.
    again = waiting_for_runtime(decision.status, 1, NOW, RuntimeUse(REF, None))
    assert again.events == ()


def test_a_finished_job_does_not_wait() -> None:
    done = JobStatus(phase=Phase.SUCCEEDED)
    assert waiting_for_runtime(done, 1, NOW, RuntimeUse(REF, None)).status == done


def test_a_new_copy_is_written_before_the_pods() -> None:
    decision = Decision(JobStatus(phase=Phase.PENDING), (), None, status_waits=True)
    new = runtime_use(REF, JobStatus(), FOUND)
    recorded = with_runtime_recorded(decision, new)
    assert recorded.status.runtime == new.snapshot
    assert not recorded.status_waits
    kept = runtime_use(REF, JobStatus(runtime=COPY), None)
    assert with_runtime_recorded(decision, kept) is decision


def job_body(replicas: int, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "gpu-ddp"}, "replicas": replicas, "gpusPerReplica": 0},
        "status": status,
    }


@pytest.mark.parametrize(
    ("mode", "replicas", "status", "refused"),
    [
        ("DistributedDataParallel", 2, {"worldSize": 2}, False),  # unchanged
        ("DistributedDataParallel", 3, {"worldSize": 2}, True),  # a fixed world changed
        ("DistributedDataParallel", 3, {}, False),  # not started yet
        ("DistributedDataParallel", 3, {"worldSize": 2, "phase": "Succeeded"}, False),
        ("Elastic", 3, {"worldSize": 2}, False),  # elastic worlds change
    ],
)
def test_a_running_job_keeps_its_world_unless_its_runtimes_mode_is_elastic(
    mode: str, replicas: int, status: dict[str, Any], refused: bool
) -> None:
    template = {"spec": {"containers": [{"name": "trainer", "image": "x"}]}}
    spec: dict[str, Any] = {"mode": mode, "template": template}
    if mode == "Elastic":
        spec["elastic"] = {"minReplicas": 1, "maxReplicas": 4}
    copy = RuntimeSnapshot(kind=REF.kind, name="gpu-ddp", generation=1, spec=spec)
    out = merged_body(job_body(replicas, **status), RuntimeUse(REF, copy))
    if refused:
        assert isinstance(out, str)
        assert out.startswith("spec.replicas: the world size of a running")
        assert "ClusterMultiGPURuntime gpu-ddp" in out
    else:
        assert not isinstance(out, str), out

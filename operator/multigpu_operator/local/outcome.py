"""A local run's result, by the operator's own success rule (pure).

The exits are shown to policy/failures/failed_pods.py as the pods the operator would observe, so a
local run judges one attempt as the operator does: Succeeded when every pod exited 0,
Failed as soon as one pod failed (the first to fail is reported, and its exit code is
the run's). Retrying an attempt (spec.runPolicy) is left to the cluster.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.status import Phase
from multigpu_operator.policy.failures.failed_pods import first_failure
from multigpu_operator.policy.kube.pods import count_pods

# What a shell reports for a run stopped with Ctrl-C.
INTERRUPTED_EXIT_CODE = 130


@dataclass(frozen=True)
class PodExit:
    pod: str
    index: int
    container: str
    exit_code: int  # as a container reports it: 128 + N when killed by signal N
    finished_at: float  # seconds since the epoch
    stopped: bool = False  # terminated by the run (a failed peer, Ctrl-C), not on its own


@dataclass(frozen=True)
class Outcome:
    phase: str  # a job Phase, or "Interrupted"
    exit_code: int
    message: str


def container_exit_code(returncode: int) -> int:
    """A process's return code as a container's exit code (signal N -> 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def job_outcome(job_name: str, pods: int, exits: Sequence[PodExit]) -> Outcome:
    """`exits` of the job's `pods` pods; those still running when the run ended are absent."""
    observed = [_as_pod(job_name, e) for e in exits if not e.stopped]
    failure = first_failure(observed)
    if failure is not None:
        code = failure.exit_code if failure.exit_code else 1
        return Outcome(str(Phase.FAILED), code, f"job {job_name} Failed: {failure.message()}")
    if count_pods(observed).succeeded >= pods:
        return Outcome(
            str(Phase.SUCCEEDED), 0, f"job {job_name} Succeeded: all {pods} pods exited 0"
        )
    return Outcome(
        "Interrupted",
        INTERRUPTED_EXIT_CODE,
        f"job {job_name} interrupted: {count_pods(observed).succeeded} of {pods} pods had finished",
    )


def _as_pod(job_name: str, exit: PodExit) -> dict[str, Any]:
    """The pod object the operator would observe after this exit."""
    finished = datetime.datetime.fromtimestamp(exit.finished_at, tz=datetime.UTC)
    terminated = {
        "exitCode": exit.exit_code,
        "reason": "Completed" if exit.exit_code == 0 else "Error",
        "finishedAt": finished.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    return {
        "metadata": {
            "name": exit.pod,
            "labels": {
                names.LABEL_JOB_NAME: job_name,
                names.LABEL_REPLICA_INDEX: str(exit.index),
            },
        },
        "status": {
            "phase": "Succeeded" if exit.exit_code == 0 else "Failed",
            "containerStatuses": [{"name": exit.container, "state": {"terminated": terminated}}],
        },
    }

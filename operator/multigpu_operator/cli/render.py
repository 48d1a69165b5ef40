"""`mgj render` and `mgj run --local`: the MultiGPUJobs of a file validated (offline
against the CRD, or by the API server as a dry run), planned by the operator's own
planner, and printed or run as processes on this machine."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from multigpu_operator.api.pod_labels import FIRST_ATTEMPT, with_attempt
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import KIND, Job
from multigpu_operator.api.validation import validate_object, with_defaults
from multigpu_operator.cli.manifests import is_job, read_and_note
from multigpu_operator.cli.runtimes import Finder, finder, resolve
from multigpu_operator.local.runner import run_job
from multigpu_operator.plan import DesiredState, PlanError, plan_job

# The API server assigns a job's UID on creation; offline it is shown as this.
PLACEHOLDER_UID = "uid-assigned-at-creation"

# A job as the API server stores it, or what is wrong with it; a check gives one per job.
Checked = dict[str, Any] | list[str]
Check = Callable[[list[Any], str], list[Checked]]


def check_offline(jobs: list[Any], namespace: str) -> list[Checked]:
    """Each job validated against the CRD without a server (api/validation.py), and as
    the API server would store it (nulls pruned, defaults in), which the operator reads."""
    out: list[Checked] = []
    for doc in jobs:
        problems = validate_object(doc)
        spec = None if problems else with_defaults(spec_schema(), doc["spec"])
        out.append([str(p) for p in problems] if spec is None else {**doc, "spec": spec})
    return out


def plan_documents(
    documents: Iterable[Any],
    namespace: str,
    uid: str = PLACEHOLDER_UID,
    check: Check = check_offline,
    runtimes: Finder | None = None,
) -> tuple[list[tuple[Job, DesiredState]], list[str]]:
    """Every MultiGPUJob in `documents`, validated by `check`, merged with the runtime it
    names (found by `runtimes`: cli/runtimes.py), and planned by the operator's own
    planner; plus what is wrong with the others, one line each."""
    planned: list[tuple[Job, DesiredState]] = []
    errors: list[str] = []
    jobs = [doc for doc in documents if is_job(doc)]
    for doc, stored in zip(jobs, check(jobs, namespace), strict=True):
        name = doc.get("metadata", {}).get("name", "?")
        if not isinstance(stored, list):
            stored = resolve(stored, namespace, runtimes or finder([], None, ask_cluster=False))
        if isinstance(stored, list):
            errors += [f"{name}: {p}" for p in stored]
            continue
        meta = {"namespace": namespace, "uid": uid, **doc["metadata"]}
        job = Job.from_object({**stored, "metadata": meta})
        try:
            planned.append((job, plan_job(job)))
        except PlanError as err:
            errors += [f"{name}: {conflict}" for conflict in err.conflicts]
    return planned, errors


def render(
    documents: Iterable[Any],
    namespace: str,
    check: Check = check_offline,
    runtimes: Finder | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Children of every MultiGPUJob in `documents`, through the operator's own planner."""
    planned, errors = plan_documents(documents, namespace, check=check, runtimes=runtimes)
    objects = [
        obj
        for _, desired in planned
        for obj in (desired.service, *(with_attempt(pod, FIRST_ATTEMPT) for pod in desired.pods))
    ]
    return objects, errors


def run(
    path: Path, namespace: str, *, local: bool, cpu: bool, runtimes: Finder | None = None
) -> int:
    """`mgj run`: the one MultiGPUJob in `path`, as processes on this machine."""
    if not local:
        print(
            "error: mgj run needs --local for now: running on a cluster is not supported yet; "
            f"submit the job with `kubectl apply -f {path}`",
            file=sys.stderr,
        )
        return 2
    manifests = read_and_note(path)
    # A fresh UID per run, as the API server would give: it is the rendezvous id.
    uid = f"local-{uuid.uuid4()}"
    if runtimes is None:
        runtimes = finder(manifests.runtimes, None)
    planned, errors = plan_documents(manifests.jobs, namespace, uid, runtimes=runtimes)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        return 2
    if len(planned) != 1:
        found = f"{len(planned)} {KIND}s" if planned else f"no {KIND}"
        print(f"error: {path} has {found}; mgj run runs exactly one", file=sys.stderr)
        return 2
    job, desired = planned[0]
    return run_job(job, desired, cpu=cpu, out=sys.stdout, err=sys.stderr)

"""The `mgj` command line.

mgj render FILE [-n NAMESPACE]          print the objects the operator would create
mgj run FILE --local [--cpu] [-n NS]    run the job's pods as processes on this machine
mgj crd                                 print the MultiGPUJob CRD
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from multigpu_operator import __version__
from multigpu_operator.api.crd import crd
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import KIND, Job
from multigpu_operator.api.validation import validate_object, with_defaults
from multigpu_operator.local.runner import run_job
from multigpu_operator.plan import DesiredState, PlanError, plan_job
from multigpu_operator.policy.pods import with_attempt

# The API server assigns a job's UID on creation; offline it is shown as this.
PLACEHOLDER_UID = "uid-assigned-at-creation"


def plan_documents(
    documents: Iterator[Any], namespace: str, uid: str = PLACEHOLDER_UID
) -> tuple[list[tuple[Job, DesiredState]], list[str]]:
    """Every MultiGPUJob in `documents`, checked as the API server would, and planned by
    the operator's own planner; plus what is wrong with the others."""
    planned: list[tuple[Job, DesiredState]] = []
    errors: list[str] = []
    for doc in documents:
        if not isinstance(doc, Mapping) or doc.get("kind") != KIND:
            continue
        name = doc.get("metadata", {}).get("name", "?")
        problems = validate_object(doc)
        if problems:
            errors += [f"{name}: {p}" for p in problems]
            continue
        meta = {"namespace": namespace, "uid": uid, **doc["metadata"]}
        # The spec as the API server would store it (nulls pruned, defaults in), which
        # is what the operator reads.
        spec = with_defaults(spec_schema(), doc["spec"])
        job = Job.from_object({**doc, "metadata": meta, "spec": spec})
        try:
            planned.append((job, plan_job(job)))
        except PlanError as err:
            errors.append(f"{name}: {err}")
    return planned, errors


def render(documents: Iterator[Any], namespace: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Children of every MultiGPUJob in `documents`, through the operator's own planner."""
    planned, errors = plan_documents(documents, namespace)
    objects = [
        obj
        for _, desired in planned
        for obj in (desired.service, *(with_attempt(pod, 1) for pod in desired.pods))
    ]
    return objects, errors


def run(file: Path, namespace: str, *, local: bool, cpu: bool) -> int:
    """`mgj run`: the one MultiGPUJob in `file`, as processes on this machine."""
    if not local:
        print(
            "error: mgj run needs --local for now: running on a cluster is not supported yet; "
            f"submit the job with `kubectl apply -f {file}`",
            file=sys.stderr,
        )
        return 2
    # A fresh UID per run, as the API server would give: it is the rendezvous id.
    planned, errors = plan_documents(_read_documents(file), namespace, f"local-{uuid.uuid4()}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        return 2
    if len(planned) != 1:
        found = f"{len(planned)} {KIND}s" if planned else f"no {KIND}"
        print(f"error: {file} has {found}; mgj run runs exactly one", file=sys.stderr)
        return 2
    job, desired = planned[0]
    return run_job(job, desired, cpu=cpu, out=sys.stdout, err=sys.stderr)


def _read_documents(file: Path) -> Iterator[Any]:
    text = sys.stdin.read() if str(file) == "-" else file.read_text()
    return yaml.safe_load_all(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mgj", description="multigpu-operator tools")
    parser.add_argument("--version", action="version", version=f"mgj {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    render_cmd = sub.add_parser("render", help="print the pods and Service a job would get")
    render_cmd.add_argument("file", type=Path, help="a YAML file with MultiGPUJob(s); - for stdin")
    render_cmd.add_argument("-n", "--namespace", default="default")
    run_cmd = sub.add_parser("run", help="run a job's pods (--local: as processes here)")
    run_cmd.add_argument("file", type=Path, help="a YAML file with one MultiGPUJob; - for stdin")
    run_cmd.add_argument(
        "--local", action="store_true", help="run on this machine (required for now)"
    )
    run_cmd.add_argument(
        "--cpu",
        action="store_true",
        help="run a GPU job on CPU: each GPU becomes a CPU process on the gloo backend",
    )
    run_cmd.add_argument("-n", "--namespace", default="default")
    sub.add_parser("crd", help="print the MultiGPUJob CustomResourceDefinition")
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except OSError as err:
        print(f"error: {err.filename or args.file}: {err.strerror}", file=sys.stderr)
        return 2
    except yaml.YAMLError as err:
        print(f"error: {args.file} is not valid YAML: {err}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "crd":
        yaml.safe_dump(crd(), sys.stdout, sort_keys=False)
        return 0
    if args.command == "run":
        return run(args.file, args.namespace, local=args.local, cpu=args.cpu)
    objects, errors = render(_read_documents(args.file), args.namespace)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if objects:
        yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)
    if not objects and not errors:
        print(f"error: no {KIND} in {args.file}", file=sys.stderr)
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

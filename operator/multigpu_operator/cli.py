"""The `mgj` command line.

mgj render FILE|DIR [-n NAMESPACE]          print the objects the operator would create
mgj render FILE|DIR --server [-n NS]        the same, the jobs checked by the cluster's API
                                            server (a dry run through the kubeconfig)
mgj run FILE|DIR --local [--cpu] [-n NS]    run the job's pods as processes on this machine
mgj logs JOB [-n NS] [--attempt N] [--replica N] [-f]  every rank's log, by replica index
mgj crd                                     print the MultiGPUJob CRD
mgj submit|get|wait|delete|describe ...     jobs on the cluster (cli_jobs.py)

Installed as `kubectl-mgj` too, so that `kubectl mgj get` is the same command.

FILE is a YAML or JSON file of one or more documents (- reads stdin); a directory stands
for its .yaml, .yml and .json files in name order, as `kubectl apply -f DIR` reads it.
Documents of other kinds are skipped, with a note saying so.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from multigpu_operator import __version__, cli_jobs
from multigpu_operator.api.crd import crd
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import KIND, Job
from multigpu_operator.api.validation import validate_object, with_defaults
from multigpu_operator.cli_logs import LogsError, add_parser
from multigpu_operator.cluster.errors import ClusterError
from multigpu_operator.local.runner import run_job
from multigpu_operator.plan import DesiredState, PlanError, plan_job
from multigpu_operator.policy.pods import with_attempt

# The API server assigns a job's UID on creation; offline it is shown as this.
PLACEHOLDER_UID = "uid-assigned-at-creation"
# What `kubectl apply -f DIR` reads from a directory.
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

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
) -> tuple[list[tuple[Job, DesiredState]], list[str]]:
    """Every MultiGPUJob in `documents`, validated by `check`, and planned by the
    operator's own planner; plus what is wrong with the others, one line each."""
    planned: list[tuple[Job, DesiredState]] = []
    errors: list[str] = []
    jobs = [doc for doc in documents if _is_job(doc)]
    for doc, stored in zip(jobs, check(jobs, namespace), strict=True):
        name = doc.get("metadata", {}).get("name", "?")
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
    documents: Iterable[Any], namespace: str, check: Check = check_offline
) -> tuple[list[dict[str, Any]], list[str]]:
    """Children of every MultiGPUJob in `documents`, through the operator's own planner."""
    planned, errors = plan_documents(documents, namespace, check=check)
    objects = [
        obj
        for _, desired in planned
        for obj in (desired.service, *(with_attempt(pod, 1) for pod in desired.pods))
    ]
    return objects, errors


@dataclass(frozen=True)
class Manifests:
    """The documents read from a file, a directory or stdin."""

    jobs: list[Any]  # the MultiGPUJobs
    skipped: list[str]  # one note per other document


def read_manifests(path: Path) -> Manifests:
    jobs: list[Any] = []
    skipped: list[str] = []
    for where, doc in _documents(path):
        if _is_job(doc):
            jobs.append(doc)
        elif doc is not None:  # an empty document (a stray ---) is no document
            skipped.append(f"skipped {where}: {_describe(doc)}, not a {KIND}")
    return Manifests(jobs, skipped)


class InvalidYaml(ValueError):
    def __init__(self, source: str, error: yaml.YAMLError) -> None:
        super().__init__(f"{source} is not valid YAML: {error}")


def _documents(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, document) for every document of `path`."""
    if str(path) == "-":
        yield from _numbered("stdin", sys.stdin.read())
    elif path.is_dir():
        for file in sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES):
            yield from _numbered(str(file), file.read_text())
    else:
        yield from _numbered(str(path), path.read_text())


def _numbered(source: str, text: str) -> Iterator[tuple[str, Any]]:
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        raise InvalidYaml(source, err) from err
    for number, doc in enumerate(documents, start=1):
        yield f"{source} document {number}", doc


def _is_job(doc: Any) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") == KIND


def _describe(doc: Any) -> str:
    if not isinstance(doc, Mapping):
        return f"a {type(doc).__name__}"
    name = (doc.get("metadata") or {}).get("name")
    kind = doc.get("kind") or "an object without a kind"
    return f"{kind} {name!r}" if name else str(kind)


def run(path: Path, namespace: str, *, local: bool, cpu: bool) -> int:
    """`mgj run`: the one MultiGPUJob in `path`, as processes on this machine."""
    if not local:
        print(
            "error: mgj run needs --local for now: running on a cluster is not supported yet; "
            f"submit the job with `kubectl apply -f {path}`",
            file=sys.stderr,
        )
        return 2
    manifests = _read_and_note(path)
    # A fresh UID per run, as the API server would give: it is the rendezvous id.
    planned, errors = plan_documents(manifests.jobs, namespace, f"local-{uuid.uuid4()}")
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


def _read_and_note(path: Path) -> Manifests:
    manifests = read_manifests(path)
    for note in manifests.skipped:
        print(f"note: {note}", file=sys.stderr)
    return manifests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mgj", description="multigpu-operator tools")
    parser.add_argument("--version", action="version", version=f"mgj {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    render_cmd = sub.add_parser("render", help="print the pods and Service a job would get")
    render_cmd.add_argument(
        "file", type=Path, help="a YAML file with MultiGPUJob(s), a directory of them, - for stdin"
    )
    render_cmd.add_argument("-n", "--namespace", default="default")
    render_cmd.add_argument(
        "--server",
        action="store_true",
        help="have the cluster's API server check the jobs (a dry run, kubeconfig's context)",
    )
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
    add_parser(sub)
    cli_jobs.add_parsers(sub)
    sub.add_parser("crd", help="print the MultiGPUJob CustomResourceDefinition")
    args = parser.parse_args(argv)
    source = getattr(args, "file", None)
    try:
        return _dispatch(args)
    except BrokenPipeError:
        # The reader went away (`mgj crd | head`): stop quietly, with the status Python's
        # documentation advises. Python flushes stdout once more on exit; point it at
        # /dev/null so that cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as err:
        print(f"error: {err.filename or source}: {err.strerror}", file=sys.stderr)
        return 2
    except InvalidYaml as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ClusterError as err:
        print(f"error: the API server could not be asked: {err}", file=sys.stderr)
        return 2
    except LogsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1

    except KeyboardInterrupt:  # Ctrl-C ends `mgj logs --follow`
        return 130


def check_on_server(jobs: list[Any], namespace: str) -> list[Checked]:
    """Each job created as a dry run by the API server of the kubeconfig's current
    context: as the server would store it, or the server's own words refusing it."""
    from multigpu_operator.client import kubeconfig_login
    from multigpu_operator.cluster.job_dry_run import dry_run_jobs

    answers = dry_run_jobs(kubeconfig_login(), jobs, namespace)
    return [a if isinstance(a, dict) else [a] for a in answers]


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "crd":
        yaml.safe_dump(crd(), sys.stdout, sort_keys=False)
        sys.stdout.flush()
        return 0
    if args.command == "run":
        return run(args.file, args.namespace, local=args.local, cpu=args.cpu)
    if args.command in cli_jobs.COMMANDS:
        return cli_jobs.run(args)
    if args.command == "logs":
        return cli_jobs.logs(args)
    manifests = _read_and_note(args.file)
    objects, errors = render(
        manifests.jobs, args.namespace, check_on_server if args.server else check_offline
    )
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if objects:
        yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)
        sys.stdout.flush()
    if not objects and not errors:
        where = "stdin" if str(args.file) == "-" else args.file
        print(f"error: no {KIND} in {where}", file=sys.stderr)
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

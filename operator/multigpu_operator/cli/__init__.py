"""The `mgj` command line.

mgj render FILE|DIR [-n NAMESPACE]          print the objects the operator would create
mgj render FILE|DIR --server [-n NS]        the same, the jobs checked by the cluster's API
                                            server (a dry run through the kubeconfig)
mgj run FILE|DIR --local [--cpu] [-n NS]    run the job's pods as processes on this machine
  (render and run: --runtimes FILE|DIR gives the runtimes jobs name, beside those in
  FILE|DIR; one in neither is read from the cluster through the kubeconfig)
mgj logs JOB [-n NS] [--attempt N] [--replica N] [-f]  every rank's log, by replica index
mgj crd                                     print the MultiGPUJob CRD
mgj submit|get|wait|delete|describe ...     jobs on the cluster (jobs.py)

Installed as `kubectl-mgj` too, so that `kubectl mgj get` is the same command. One module
per part: the manifests read (manifests.py), render and run (render.py), the job commands
(jobs.py, their text in show.py, describe.py), logs (logs.py), the live status line
(progress_line.py). The requests go through multigpu_operator.client.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from multigpu_operator import __version__
from multigpu_operator.api.crd import crd
from multigpu_operator.api.spec import KIND
from multigpu_operator.cli import jobs, logs, render, runtimes
from multigpu_operator.cli.manifests import InvalidYaml, read_and_note, read_manifests
from multigpu_operator.client.log_pods import LogsError
from multigpu_operator.cluster.errors import ClusterError

if TYPE_CHECKING:
    from multigpu_operator.cluster.protocol import Cluster


def main(argv: list[str] | None = None, cluster: Cluster | None = None) -> int:
    """`mgj ARGV...`; its requests go to `cluster` when given (tests' in-memory API
    server), else to the API server of the kubeconfig's current context."""
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
    for cmd in (render_cmd, run_cmd):
        cmd.add_argument(
            "--runtimes",
            type=Path,
            action="append",
            default=[],
            metavar="FILE|DIR",
            help="runtimes the jobs name (else those in FILE, else the cluster's)",
        )
    logs.add_parser(sub)
    jobs.add_parsers(sub)
    sub.add_parser("crd", help="print the MultiGPUJob CustomResourceDefinition")
    args = parser.parse_args(argv)
    source = getattr(args, "file", None)
    try:
        return _dispatch(args, cluster)
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


def check_on_server(
    cluster: Cluster | None, manifests: list[Any], namespace: str
) -> list[render.Checked]:
    """Each job created as a dry run by the API server (`cluster`, else the kubeconfig's
    current context's): as the server would store it, or its own words refusing it."""
    # Only here: the offline commands need no HTTP client.
    from multigpu_operator.client import dry_run, kubeconfig_login, run_with

    def ask(kube: Cluster) -> Any:
        return dry_run.dry_run_jobs(kube, manifests, namespace)

    answers = run_with(cluster, kubeconfig_login(), ask)
    return [a if isinstance(a, dict) else [a] for a in answers]


def runtime_documents(paths: list[Path]) -> list[Any]:
    """The runtimes of the --runtimes files and directories."""
    return [doc for path in paths for doc in read_manifests(path).runtimes]


def _dispatch(args: argparse.Namespace, cluster: Cluster | None) -> int:
    if args.command == "crd":
        yaml.safe_dump(crd(), sys.stdout, sort_keys=False)
        sys.stdout.flush()
        return 0
    if args.command == "run":
        given = runtime_documents(args.runtimes)
        found = runtimes.finder([*given, *read_manifests(args.file).runtimes], cluster)
        return render.run(args.file, args.namespace, local=args.local, cpu=args.cpu, runtimes=found)
    if args.command in jobs.COMMANDS:
        return jobs.run(args, cluster)
    if args.command == "logs":
        return logs.logs(args, cluster)
    manifests = read_and_note(args.file)
    on_server = functools.partial(check_on_server, cluster)
    check = on_server if args.server else render.check_offline
    found = runtimes.finder([*runtime_documents(args.runtimes), *manifests.runtimes], cluster)
    objects, errors = render.render(manifests.jobs, args.namespace, check, found)
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

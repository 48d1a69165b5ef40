"""`mgj submit`, `get`, `wait`, `delete` and `describe`: jobs on the cluster of the
kubeconfig's current context, through multigpu_operator.client; how they look is
show.py's and describe.py's.

Exit codes of `mgj wait`: 0 the phase was reached, 1 the job ended otherwise, 2 the
timeout passed or the API server could not be asked.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from multigpu_operator.api.status import Phase
from multigpu_operator.cli.describe import describe
from multigpu_operator.cli.progress_line import StatusLine
from multigpu_operator.cli.show import job_table, show_job, status_line

if TYPE_CHECKING:
    from multigpu_operator.client import Client
    from multigpu_operator.cluster.protocol import Cluster

COMMANDS = ("submit", "get", "wait", "delete", "describe")
# Exit codes of `mgj wait`.
REACHED, ENDED_OTHERWISE, TIMED_OUT = 0, 1, 2


def add_parsers(sub: Any) -> None:
    """The job subcommands on the `mgj` parser's subparsers."""
    submit = _common(sub.add_parser("submit", help="create a job from a file; print its name"))
    submit.add_argument("file", help="a YAML file with one MultiGPUJob; - for stdin")
    get = _common(sub.add_parser("get", help="a job's phase and pods, or a table of jobs"))
    get.add_argument("job", nargs="?", help="the MultiGPUJob's name (none: every job)")
    wait = _common(sub.add_parser("wait", help="wait for a job's phase; the exit code says"))
    wait.add_argument("job", help="the MultiGPUJob's name")
    wait.add_argument(
        "--for", dest="for_", choices=[Phase.SUCCEEDED, Phase.RUNNING], default=Phase.SUCCEEDED
    )
    wait.add_argument("--timeout", type=float, help="seconds (default: no limit)")
    delete = _common(sub.add_parser("delete", help="delete a job and its pods"))
    delete.add_argument("job", help="the MultiGPUJob's name")
    delete.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="return once the job and its pods are gone, as kubectl delete (default)",
    )
    delete.add_argument("--timeout", type=float, default=120.0, help="seconds (default: 120)")
    describe = _common(sub.add_parser("describe", help="why a job waits, its failures, events"))
    describe.add_argument("job", help="the MultiGPUJob's name")


def _common(cmd: argparse.ArgumentParser) -> argparse.ArgumentParser:
    cmd.add_argument("-n", "--namespace", help="default: the kubeconfig context's, else default")
    cmd.add_argument("--kubeconfig", help="the kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    return cmd


def run(args: argparse.Namespace, cluster: Cluster | None = None, out: TextIO | None = None) -> int:
    # Only here: the offline commands need no HTTP client.
    from multigpu_operator.client import Client, ClientError

    out = out or sys.stdout
    try:
        code = _run(Client(args.namespace, args.kubeconfig, cluster=cluster), args, out)
    except ClientError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    # Piped, the output is still buffered: a reader that went away shows here, where
    # mgj's main stops quietly, rather than in Python's last flush at exit.
    out.flush()
    return code


def _run(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    if args.command == "submit":
        source = sys.stdin.read() if args.file == "-" else _read(args.file)
        print(client.create(source), file=out)
    elif args.command == "get" and args.job:
        out.write(show_job(client.get(args.job)))
    elif args.command == "get":
        out.write(job_table(client.list(), datetime.now(UTC)))
    elif args.command == "wait":
        return wait(client, args.job, Phase(args.for_), args.timeout, out)
    elif args.command == "delete":
        client.delete(args.job, args.wait, args.timeout)
        print(f"{args.job} deleted", file=out)
    elif args.command == "describe":
        out.write(describe(client, args.job))
    return 0


def _read(path: str) -> str:
    with open(path) as file:  # OSError: mgj's main names the file
        return file.read()


def wait(
    client: Client,
    name: str,
    phase: Phase,
    timeout: float | None,
    out: TextIO,
    poll_s: float | None = None,
) -> int:
    """Wait for `phase`; on a terminal a live status line with the time waited, piped a
    line per change (progress_line.py); then how it ended, one line."""
    from multigpu_operator.client import JobEnded, WaitTimeout

    live = StatusLine(out)
    try:
        client.wait(name, phase, timeout, lambda s: live.show(status_line(name, s)), poll_s)
        code, message = REACHED, f"{name} is {phase}"
    except JobEnded as err:
        code, message = ENDED_OTHERWISE, str(err)
    except WaitTimeout as err:
        code, message = TIMED_OUT, str(err)
    finally:
        live.end()
    print(message, file=out if code == REACHED else sys.stderr)
    return code

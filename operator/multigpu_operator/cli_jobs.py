"""`mgj submit`, `get`, `wait`, `delete`, `describe` and `logs`: jobs on the cluster of
the kubeconfig's current context, through multigpu_operator.client (logs through
cluster/pod_logs.py).

Exit codes of `mgj wait`: 0 the phase was reached, 1 the job ended otherwise, 2 the
timeout passed or the API server could not be asked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.cli_progress import Above, StatusLine, is_terminal

if TYPE_CHECKING:
    from multigpu_operator.client import Client, JobView

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


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    # Only here: the offline commands need no HTTP client.
    from multigpu_operator.client import Client, ClientError

    out = out or sys.stdout
    try:
        code = _run(Client(args.namespace, args.kubeconfig), args, out)
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
        from multigpu_operator.cli_describe import describe

        out.write(describe(client, args.job))
    return 0


def _read(path: str) -> str:
    with open(path) as file:  # OSError: mgj's main names the file
        return file.read()


def show_job(view: JobView) -> str:
    status = view.status
    lines = [
        f"Job:       {view.name} (namespace {view.namespace})",
        f"Phase:     {status.phase or 'new'}" + (f" ({status.reason})" if status.reason else ""),
        f"Attempt:   {status.attempt or 1}    Restarts: {status.restarts or 0}",
    ]
    if status.progress is not None:
        lines.append(f"Progress:  {progress_text(status)}")
    if view.pods:
        lines.append("Pods:")
        lines += [
            f"  r{p.replica:<3} {p.name:<30} {p.node or '-':<20} {p.state}" for p in view.pods
        ]
    else:
        lines.append("Pods:      none")
    return "\n".join(lines) + "\n"


def job_table(views: list[JobView], now: datetime) -> str:
    rows = [("NAME", "PHASE", "ATTEMPT", "PROGRESS", "ETA", "AGE")] + [
        (
            v.name,
            str(v.phase or "-"),
            str(v.status.attempt or "-"),
            (v.status.progress.summary or "-") if v.status.progress else "-",
            (v.status.progress.eta or "-") if v.status.progress else "-",
            _age(v.created, now),
        )
        for v in views
    ]
    width = max(len(r[0]) for r in rows) + 2
    return "".join(f"{r[0]:<{width}}{r[1]:<12}{r[2]:<9}{r[3]:<12}{r[4]:<9}{r[5]}\n" for r in rows)


def progress_text(status: JobStatus) -> str:
    """E.g. "42% (step 1200 of 2876, ETA 1h12m)", "step 1200"; "" when none is known."""
    shown = status.progress
    if shown is None:
        return ""
    summary = shown.summary or f"step {shown.step}"
    if not shown.total_steps:
        return summary
    eta = f", ETA {shown.eta}" if shown.eta else ""
    return f"{summary} (step {shown.step} of {shown.total_steps}{eta})"


def _age(created: str | None, now: datetime) -> str:
    if not created:
        return "-"
    seconds = int((now - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def status_line(name: str, status: JobStatus) -> str:
    pods = status.pods
    running = f", {pods.running or 0}/{status.replicas or '?'} pods running" if pods else ""
    why = f" ({status.reason})" if status.reason else ""
    done = f", {progress_text(status)}" if status.progress else ""
    return f"{name}: {status.phase or 'new'}{why}, attempt {status.attempt or 1}{running}{done}"


def wait(
    client: Client,
    name: str,
    phase: Phase,
    timeout: float | None,
    out: TextIO,
    poll_s: float | None = None,
) -> int:
    """Wait for `phase`; on a terminal a live status line with the time waited, piped a
    line per change (cli_progress.py); then how it ended, one line."""
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


def logs(args: argparse.Namespace) -> int:
    """`mgj logs`. Following, the job's status goes to stderr as `mgj wait` shows it
    (live under the log lines when both are the terminal), so the log lines on stdout
    stay the pods' own."""
    from multigpu_operator.cli_logs import request_of
    from multigpu_operator.client import context_namespace, kubeconfig_login
    from multigpu_operator.cluster.pod_logs import print_logs

    login = kubeconfig_login(args.kubeconfig)
    args.namespace = args.namespace or context_namespace(login)
    if not args.follow:
        print_logs(login, request_of(args), False, sys.stdout)
        return 0
    live = StatusLine(sys.stderr)
    out = Above(sys.stdout, live) if live.tty and is_terminal(sys.stdout) else sys.stdout

    def show(job: Mapping[str, Any]) -> None:
        live.show(status_line(args.job, JobStatus.model_validate(job.get("status") or {})))

    try:
        print_logs(login, request_of(args), True, out, show)
    finally:
        live.end()
    return 0

"""`mgj logs`: the command line of multigpu_operator.client's pod logs (which pods, in
what order and how their lines look: client/log_pods.py). Following, the job's status
goes to stderr as `mgj wait` shows it (live under the log lines when both are the
terminal), so the log lines on stdout stay the pods' own."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from multigpu_operator.api.status import JobStatus
from multigpu_operator.cli.progress_line import Above, StatusLine, is_terminal
from multigpu_operator.cli.show import status_line
from multigpu_operator.client.log_pods import LogRequest

if TYPE_CHECKING:
    from multigpu_operator.cluster.protocol import Cluster


def add_parser(sub: Any) -> None:
    """The `mgj logs` subcommand on the `mgj` parser's subparsers."""
    cmd = sub.add_parser("logs", help="print the log of every rank of a job, by replica index")
    cmd.add_argument("job", help="the MultiGPUJob's name")
    cmd.add_argument("-n", "--namespace", help="default: the kubeconfig context's, else default")
    cmd.add_argument("--kubeconfig", help="the kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    cmd.add_argument("--attempt", type=int, help="the pods of this attempt (default: the latest)")
    cmd.add_argument("--replica", type=int, help="only the pod of this replica index")
    cmd.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="stream the logs, and those of later attempts, until the job ends",
    )
    cmd.add_argument("-c", "--container", help="the container (default: the training one)")
    cmd.add_argument("--tail", type=int, help="only the last N lines of each log")
    cmd.add_argument("--timestamps", action="store_true", help="prefix each line with its time")


def request_of(args: argparse.Namespace) -> LogRequest:
    return LogRequest(
        args.job,
        args.namespace,
        args.attempt,
        args.container,
        args.tail,
        args.timestamps,
        args.replica,
    )


def logs(args: argparse.Namespace, cluster: Cluster | None = None) -> int:
    """`mgj logs`: the logs as they are, or followed until the job ends; on `cluster`,
    else on the kubeconfig's current context."""
    # Only here: the offline commands need no HTTP client.
    from multigpu_operator.client import context_namespace, kubeconfig_login, pod_logs, run_with

    login = kubeconfig_login(args.kubeconfig)
    args.namespace = args.namespace or context_namespace(login)
    request = request_of(args)
    if not args.follow:
        run_with(cluster, login, lambda kube: pod_logs.read_logs(kube, request, sys.stdout))
        return 0
    live = StatusLine(sys.stderr)
    out = Above(sys.stdout, live) if live.tty and is_terminal(sys.stdout) else sys.stdout

    def show(job: Mapping[str, Any]) -> None:
        live.show(status_line(args.job, JobStatus.model_validate(job.get("status") or {})))

    try:
        run_with(cluster, login, lambda kube: pod_logs.follow_logs(kube, request, out, on_job=show))
    finally:
        live.end()
    return 0

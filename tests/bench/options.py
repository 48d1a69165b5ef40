"""The benchmarks' command-line options: bench_create.py's, and the cluster options
bench_plane.py shares with it."""

from __future__ import annotations

import argparse

from multigpu_operator.api.spec import DnsNames

GPUS_PER_NODE = 8
FRESH_HELP = "stop the local cluster first and start a new one (a reused one grows slower)"
DIRECT_HELP = (
    "last, time a client sending the operator's own objects itself (the job, its Service "
    "and planned pods, two status writes and Events); see docs/benchmarks.md"
)


def parse_args(doc: str | None) -> argparse.Namespace:
    """bench_create.py's options, checked: the run's pods must fit the nodes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--nodes", type=int, default=200, help="simulated 8-GPU nodes")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--pods", type=int, default=8, help="pods per job, one GPU each")
    parser.add_argument("--rate", type=float, default=0, help="jobs/s; 0: all at once")
    parser.add_argument("--duration", type=float, default=0, help="seconds at --rate")
    parser.add_argument("--existing", type=int, default=0, help="suspended jobs already there")
    parser.add_argument("--cycles", type=int, default=0, help="delete/create rounds after")
    parser.add_argument("--profile", default="", help="py-spy raw output file")
    parser.add_argument(
        "--plane-profile",
        default="",
        metavar="DIR",
        help="record the API server's CPU profile (pprof) in each phase into DIR",
    )
    parser.add_argument(
        "--plane-profile-s", type=int, default=30, help="seconds of it, from the submission"
    )
    parser.add_argument("--direct", action="store_true", help=DIRECT_HELP)
    parser.add_argument(
        "--results",
        default="",
        metavar="DIR",
        help="write the run's figures, commit, machine and command as JSON into DIR "
        "(docs/bench-results: the runs docs/benchmarks.md is generated from)",
    )
    parser.add_argument("--note", default="", help="a remark kept in the --results file")
    add_cluster_options(parser)
    args = parser.parse_args()
    if args.duration:
        args.jobs = int(args.rate * args.duration)
    check_capacity(parser, args)
    return args


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    """The options both benchmarks take: a fresh cluster, the jobs' spec.dnsNames."""
    parser.add_argument("--fresh", action="store_true", help=FRESH_HELP)
    parser.add_argument(
        "--dns-names",
        default=DnsNames.EVERY_REPLICA.value,
        choices=tuple(DnsNames),
        help="the jobs' spec.dnsNames: which pods their Service names (docs/env-contract.md)",
    )


def check_capacity(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse a run whose pods cannot all be placed: they would stay Pending and every
    wait run to its limit (both phases), with no figure at the end. The cycles delete the
    jobs before creating as many again and the existing jobs are suspended (no pods), so
    the measured jobs' pods, one GPU each, are the whole need."""
    gpus = args.jobs * args.pods
    jobs = f"{args.jobs} jobs" + (" (--rate x --duration)" if args.duration else "")
    needed = -(-gpus // GPUS_PER_NODE)  # ceiling division
    if args.nodes < needed:
        parser.error(
            f"--nodes must be at least {needed} for {jobs} x {args.pods} pods "
            f"(one GPU each, {GPUS_PER_NODE} GPUs a node): {args.nodes} nodes have "
            f"{args.nodes * GPUS_PER_NODE} GPUs for {gpus} pods"
        )

"""The benchmark's figures and their one-line-per-goal report (issue 15's goals), each
against the bare client measured in the same run where the bare client has one."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field

NAN = math.nan


@dataclass
class Figures:
    jobs_per_s: float = NAN
    p50_created_s: float = NAN  # submission -> the last of the job's pods created
    p99_created_s: float = NAN
    p50_running_s: float = NAN  # all the job's pods Running -> its status says Running
    p99_running_s: float = NAN
    requests_per_job: float = NAN  # list and watch left out: they are per operator
    requests_by_kind: str = ""
    waits: str = ""  # the operator's mean queue wait and request answer times (ms)
    events_per_job: float = NAN
    cpu_per_reconcile_ms: float = NAN
    cpu_per_job_ms: float = NAN  # the operator's CPU over the measured jobs
    control_plane_ms_per_job: float = NAN  # the API server's, etcd's, ... CPU per job
    control_plane_by_program: dict[str, float] = field(default_factory=dict)  # ms per job
    rss_mib: float = NAN  # with every measured job's pods in the cache
    peak_rss_mib: float = NAN
    settled_rss_mib: float = NAN  # 20 s later: watching only, the idle connections closed
    cycle_rss_mib: list[float] = field(default_factory=list)
    profile: list[str] = field(default_factory=list)
    plane_profile: str = ""  # the API server's pprof file of the phase, if recorded
    control_plane_idle_cores: float = NAN  # before any job: the nodes' heartbeats

    def set_control_plane(self, by_program: dict[str, float]) -> None:
        self.control_plane_by_program = by_program
        self.control_plane_ms_per_job = sum(by_program.values())


def _line(label: str, op: float, bare: float, goal: str, unit: str = "") -> str:
    ratio = op / bare if bare and not math.isnan(bare) else NAN
    bare_text = "-" if math.isnan(bare) else f"{bare:.3f}"
    ratio_text = "-" if math.isnan(ratio) else f"{ratio:.2f}x"
    return f"{label:36}{op:>10.3f}{unit:1}{bare_text:>12}{ratio_text:>9}   goal: {goal}"


def print_report(
    args: argparse.Namespace,
    op: Figures,
    bare: Figures | None = None,
    direct: Figures | None = None,
) -> None:
    """The report; without `bare`, the operator's figures alone, printed as soon as its
    phase ends so that a run cut off during the bare client's still shows them. With
    `direct` (the operator's objects sent straight), the operator against it too."""
    pods = args.pods
    schedule = f"at {args.rate:g} jobs/s" if args.rate else "all at once"
    print(
        f"\n{args.jobs} jobs x {pods} pods ({args.jobs * pods} pods) {schedule}, "
        f"{args.nodes} nodes, {args.existing} existing jobs, dnsNames {args.dns_names}"
    )
    if bare is None:
        print("operator's figures only: the bare client's run is still to come (its columns -)")
        bare = Figures()
    print(f"{'':36}{'operator':>10} {'bare client':>12}{'ratio':>9}")
    print(_line("jobs/s", op.jobs_per_s, bare.jobs_per_s, ">= 0.8x"))
    print(
        _line("p50 submit -> all pods created (s)", op.p50_created_s, bare.p50_created_s, "<= 1.5x")
    )
    sustained = "<= 1.5x; at a rate: <= bare + 1 s"
    if not math.isnan(bare.p99_created_s):
        sustained += f" (= {bare.p99_created_s + 1:.3f})"
    print(
        _line("p99 submit -> all pods created (s)", op.p99_created_s, bare.p99_created_s, sustained)
    )
    print(_line("p50 all pods Running -> job Running", op.p50_running_s, NAN, "-"))
    print(_line("p99 all pods Running -> job Running", op.p99_running_s, NAN, "<= 1 s"))
    print(
        _line(
            "API requests per job, Events aside",
            op.requests_per_job,
            bare.requests_per_job,
            f"<= pods + 3 = {pods + 3}",
        )
    )
    print(f"{'':38}({op.requests_by_kind})")
    print(_line("operator Events per job", op.events_per_job, NAN, "<= 3"))
    if op.waits:
        print(f"{'mean waits of the operator (ms)':36}  ({op.waits})")
    print(
        _line(
            "CPU per reconcile (ms)",
            op.cpu_per_reconcile_ms,
            NAN,
            f"flat in existing jobs (here {args.existing})",
        )
    )
    print(_line("operator CPU per job (ms)", op.cpu_per_job_ms, NAN, "-"))
    print(
        _line(
            "control plane CPU per job (ms)",
            op.control_plane_ms_per_job,
            bare.control_plane_ms_per_job,
            "- (what the cluster spends on each job: the bound on jobs/s on a shared machine)",
        )
    )
    if op.control_plane_by_program:
        print(f"{'':38}({by_program(op, bare)})")
    idle = "- (in every phase's CPU per job, for as long as the phase lasts)"
    print(_line("control plane idle (cores)", op.control_plane_idle_cores, NAN, idle))
    print(_line(f"RSS at {args.jobs * pods} pods (MiB)", op.rss_mib, NAN, "<= 150 at 10,000 pods"))
    print(_line("peak RSS (MiB)", op.peak_rss_mib, NAN, "-"))
    print(_line("RSS 20 s later, watching (MiB)", op.settled_rss_mib, NAN, "<= 150 at 10,000 pods"))
    if op.cycle_rss_mib:
        first, last = op.cycle_rss_mib[0], op.cycle_rss_mib[-1]
        spread = 100 * (max(op.cycle_rss_mib) - min(op.cycle_rss_mib)) / first
        print(
            f"{'RSS across cycles (MiB)':36}{first:>10.1f} -> {last:.1f} over "
            f"{len(op.cycle_rss_mib)} cycles, spread {spread:.1f}%   goal: within 5%"
        )
        print(f"{'':38}({', '.join(f'{r:.1f}' for r in op.cycle_rss_mib)})")
    if direct is not None:
        print_direct(op, direct)
    if op.profile:
        print("\nprofile of the operator (py-spy):")
        print("\n".join(op.profile))
    recorded = [f.plane_profile for f in (op, bare, direct) if f is not None and f.plane_profile]
    if recorded:
        print("\nthe API server's CPU profiles (go tool pprof -top FILE): " + ", ".join(recorded))
    # Out now, not when the process exits: a run killed later (timeout piped to tee) keeps it.
    sys.stdout.flush()


def by_program(op: Figures, bare: Figures) -> str:
    """Each control-plane program's ms per job, the operator's run then the bare client's
    (where it has one): which program the difference keeps busy."""
    parts = []
    for name, ms in sorted(op.control_plane_by_program.items(), key=lambda kv: -kv[1]):
        other = bare.control_plane_by_program.get(name)
        parts.append(f"{name} {ms:.0f}" + ("" if other is None else f" / {other:.0f}"))
    return ", ".join(parts)


def print_direct(op: Figures, direct: Figures) -> None:
    """The operator against a client sending the same objects itself: meant as the
    operator's own share of the wait, what the objects cost the cluster left out (the
    client's burst and the cluster's state count too: docs/benchmarks.md)."""
    print(
        "\nagainst the operator's own objects sent straight (the job, its Service and "
        "planned pods, two status writes, two Events):"
    )
    print(f"{'':36}{'operator':>10} {'direct':>12}{'ratio':>9}")
    print(_line("jobs/s", op.jobs_per_s, direct.jobs_per_s, "-"))
    print(_line("p50 submit -> all pods created (s)", op.p50_created_s, direct.p50_created_s, "-"))
    print(_line("p99 submit -> all pods created (s)", op.p99_created_s, direct.p99_created_s, "-"))
    plane = "control plane CPU per job (ms)"
    print(_line(plane, op.control_plane_ms_per_job, direct.control_plane_ms_per_job, "-"))
    sys.stdout.flush()

"""The part of docs/benchmarks.md that says what bounds jobs/s on the machine of a run:
for each bench_create run with `--direct`, the operator against a client that sends the
operator's own objects itself (the job, its Service and planned pods, two status writes,
two Events), and the control plane's CPU per job for each of the three."""

from __future__ import annotations

from bench.results import Record

PROGRAMS = ("kube-apiserver", "kube-controller-manager", "etcd", "kwok-controller")
BOUND = """### What bounds jobs/s here

The bare client creates pods only. A job also has a Service (whose EndpointSlices the
controller-manager keeps as its pods start), larger pods (the launch contract's
environment, which every status patch of a pod rewrites with its managed fields), two
status writes and two Events. `--direct` times a client that sends exactly those objects
itself, with no operator: where the operator's jobs/s is at or above that client's, the
operator adds no wait of its own, and the ratio to the bare client measures what the job's
objects cost the control plane, which shares the machine's cores with the benchmark and
the simulated nodes. The control plane's CPU per job, by program, in ms: operator / bare /
direct."""


def _ms(rec: Record, side: str, program: str | None = None) -> str:
    figures = rec.get(side) or {}
    value = (
        figures.get("control_plane_ms_per_job")
        if program is None
        else (figures.get("control_plane_by_program") or {}).get(program)
    )
    return "-" if value is None else f"{float(value):.0f}"


def _jobs_s(rec: Record, side: str) -> float | None:
    value = (rec.get(side) or {}).get("jobs_per_s")
    return None if value is None else float(value)


def _x(mine: float | None, theirs: float | None) -> str:
    return f"{mine / theirs:.2f}x" if mine is not None and theirs else "-"


def bound_section(records: list[Record]) -> list[str]:
    runs = [r for r in records if r["benchmark"] == "bench_create" and r.get("direct")]
    lines = [BOUND, ""]
    if not runs:
        return [*lines, "No run with `--direct` recorded.", ""]
    head = " | ".join(PROGRAMS)
    lines += [
        f"| size | jobs/s: operator / direct | operator / bare | control plane, all | {head} "
        "| operator's own CPU per job | commit |",
        "|---|---|---|---|" + "---|" * len(PROGRAMS) + "---|---|",
    ]
    for rec in reversed(runs):
        size = f"{rec['size']['jobs']:,} x {rec['size']['pods']}"
        op, direct, bare = (_jobs_s(rec, s) for s in ("operator", "direct", "bare"))
        planes = [
            f"{_ms(rec, 'operator', p)} / {_ms(rec, 'bare', p)} / {_ms(rec, 'direct', p)}"
            for p in (None, *PROGRAMS)
        ]
        own = (rec.get("operator") or {}).get("cpu_per_job_ms")
        lines.append(
            f"| {size} | {_x(op, direct)} | {_x(op, bare)} | "
            + " | ".join(planes)
            + f" | {'-' if own is None else f'{float(own):.0f} ms'} | {str(rec['commit'])[:7]} |"
        )
    return [*lines, ""]

"""The parts of docs/benchmarks.md about the control plane's side of a job.

What bounds jobs/s on the machine of a run: for each bench_create run with `--direct`, the
operator against a client that sends the operator's own objects itself (the job, its
Service and planned pods, two status writes, two Events), and the control plane's CPU per
job for each of the three. What a job costs the control plane: the newest bench_plane run,
the price of each of those objects, sent with no operator."""

from __future__ import annotations

from typing import Any

from bench.results import Record, table_command

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


PARTS = """## What a job costs the control plane

`tests/bench/bench_plane.py --jobs N [--pods P] [--dns-names ...] [--fresh] [--results DIR]`
runs no operator: it creates the objects the operator would make, part by part, each case
in a fresh namespace, and reads the control plane's CPU from submission until every pod
runs (and 5 s more) and the API server's write requests, per job. `pods` is the bare
client's; `job+pods` the MultiGPUJob (suspended) and the pods the operator plans for it
(the launch contract's env, labels, owner reference), without a Service; the last case
repeats the first, to show how far the cluster drifted. No goal: this says where a job's
cost goes."""


def _writes(case: dict[str, Any], *kinds: str) -> str:
    found = case.get("writes_per_job") or {}
    return f"{sum(float(found.get(k, 0)) for k in kinds):.1f}"


def parts_section(records: list[Record]) -> list[str]:
    runs = [r for r in records if r["benchmark"] == "bench_plane"]
    if not runs:
        return [PARTS, "", "No result file yet.", ""]
    newest = {r["size"]["dns_names"]: r for r in runs}  # each spec.dnsNames' newest run
    lines = [PARTS, ""]
    for rec in newest.values():
        lines += _parts_table(rec)
    return lines


def _parts_table(rec: Record) -> list[str]:
    size = rec["size"]
    lines = [
        f"{size['jobs']:,} jobs x {size['pods']} pods at once, "
        f"`spec.dnsNames: {size['dns_names']}`, {str(rec['commit'])[:7]}, "
        f"{rec['date'][:10]}: {table_command(rec)}. CPU in ms per job; writes per job.",
        "",
        f"| case | control plane | {' | '.join(PROGRAMS)} | pod writes | endpoint writes |"
        " seconds |",
        "|---|---|" + "---|" * len(PROGRAMS) + "---|---|---|",
    ]
    base = float(rec["cases"][0]["ms_per_job"])
    for case in rec["cases"]:
        ms = float(case["ms_per_job"])
        programs = " | ".join(f"{float(case['by_program'].get(p, 0)):.0f}" for p in PROGRAMS)
        pod_writes = _writes(case, "POST pods", "POST pods/binding", "PATCH pods/status")
        endpoints = _writes(
            case, "POST endpoints", "PUT endpoints", "POST endpointslices", "PUT endpointslices"
        )
        lines.append(
            f"| {case['case']} | {ms:.0f} ({ms / base:.2f}x) | {programs} | {pod_writes} "
            f"| {endpoints} | {float(case['seconds']):.1f} |"
        )
    return [*lines, ""]

"""docs/benchmarks.md, generated from the runs' result files in docs/bench-results/.

    .venv/bin/python tests/bench/results_page.py           # rewrite the page (make docs)
    .venv/bin/python tests/bench/results_page.py --check   # exit 1 if it is out of date

Each goal gets a table of the runs that measure it and a verdict. A goal is "met" only
when the newest run of today's code meets it: a run at or after the last commit that
changed operator/ (`git log -1 -- operator/`), from a tree without changes under
operator/. Otherwise "not met", or "not measured on today's code" when no run of it is
recorded. The page names no commit of its own, so it changes only when a result file is
added or a verdict changes (a change to operator/ after a run that measured a goal).
tests/unit/docs/test_docs_benchmarks.py fails when the page differs from what this makes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import REPO, RESULTS, Record, git, is_ancestor, load, table_command
from bench.results_plane import bound_section, parts_section
from bench.results_prose import AT_SCALE, INTRO, OTHERS
from bench.results_training import memory_section

PAGE = REPO / "docs/benchmarks.md"
MAX_ROWS = 8  # runs shown per goal, newest first; the rest stay in docs/bench-results/
MET, NOT_MET, UNMEASURED = "met", "not met", "not measured on today's code"


@cache
def operator_changed_at(repo: Path = REPO) -> str:
    """The last commit that changed operator/."""
    return git("log", "-1", "--format=%H", "--", "operator/", cwd=repo)


def todays_code(rec: Record, changed_at: str) -> bool:
    """Whether the run measured the operator as it is now."""
    return not rec.get("dirty_operator") and is_ancestor(changed_at, rec["commit"])


def op(rec: Record, key: str) -> float | None:
    value = (rec.get("operator") or {}).get(key)
    return None if value is None else float(value)


def bare(rec: Record, key: str) -> float | None:
    value = (rec.get("bare") or {}).get(key)
    return None if value is None else float(value)


def ratio(rec: Record, key: str) -> float | None:
    mine, theirs = op(rec, key), bare(rec, key)
    return mine / theirs if mine is not None and theirs else None


def at_once(rec: Record) -> bool:
    return not rec["size"].get("rate")


def sustained(rec: Record) -> bool:
    size = rec["size"]
    return float(size.get("rate") or 0) >= 10 and float(size.get("duration") or 0) >= 120


def pods(rec: Record) -> int:
    return int(rec["size"]["jobs"]) * int(rec["size"]["pods"])


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _n(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


@dataclass(frozen=True)
class Goal:
    anchor: str
    title: str
    why: str
    applies: Callable[[Record], bool]
    figure: Callable[[Record], str]
    against_bare: Callable[[Record], str]
    meets: Callable[[Record], bool | None]  # None: the run does not tell
    # (jobs, pods) shapes the goal is judged at, each by its own newest run; () = any
    sizes: tuple[tuple[int, int], ...] = ()


# The burst goals' sizes: other sizes' runs are shown, not judged.
BURST_SIZES = ((200, 8), (1000, 8))


def shape(rec: Record) -> tuple[int, int]:
    return int(rec["size"]["jobs"]), int(rec["size"]["pods"])


def shape_name(size: tuple[int, int]) -> str:
    return f"{size[0]:,} x {size[1]}"


def _cycle_spread(rec: Record) -> float | None:
    rss = (rec.get("operator") or {}).get("cycle_rss_mib") or []
    return 100 * (max(rss) - min(rss)) / rss[0] if len(rss) >= 2 else None


def _sustained_met(rec: Record) -> bool | None:
    created, bare_created = op(rec, "p99_created_s"), bare(rec, "p99_created_s")
    running = op(rec, "p99_running_s")
    if created is None or bare_created is None or running is None:
        return None
    return created <= bare_created + 1 and running <= 1


def _both_le(rec: Record, keys: tuple[str, ...], bound: float) -> bool | None:
    ratios = [ratio(rec, key) for key in keys]
    return None if any(r is None for r in ratios) else all(r <= bound for r in ratios)  # type: ignore[operator]


def _at_most(value: float | None, bound: float) -> bool | None:
    return None if value is None else value <= bound


GOALS = (
    Goal(
        "jobs-s",
        "jobs/s >= 0.8x the bare client's, jobs submitted all at once",
        "the operator should not be the bottleneck of a burst",
        at_once,
        lambda r: f"{_n(op(r, 'jobs_per_s'))} / {_n(bare(r, 'jobs_per_s'))} jobs/s",
        lambda r: _x(ratio(r, "jobs_per_s")),
        lambda r: None if ratio(r, "jobs_per_s") is None else ratio(r, "jobs_per_s") >= 0.8,  # type: ignore[operator]
        BURST_SIZES,
    ),
    Goal(
        "created",
        "p50 and p99 submission -> all pods created <= 1.5x the bare client's, all at once",
        "the same, for a job's wait",
        at_once,
        lambda r: (
            f"p50 {_n(op(r, 'p50_created_s'))} / {_n(bare(r, 'p50_created_s'))} s, "
            f"p99 {_n(op(r, 'p99_created_s'))} / {_n(bare(r, 'p99_created_s'))} s"
        ),
        lambda r: f"{_x(ratio(r, 'p50_created_s'))} / {_x(ratio(r, 'p99_created_s'))}",
        lambda r: _both_le(r, ("p50_created_s", "p99_created_s"), 1.5),
        BURST_SIZES,
    ),
    Goal(
        "sustained",
        "10 jobs/s for 2 min: p99 created within 1 s of the bare client's, "
        "p99 all pods Running -> job Running <= 1 s",
        "a steady stream must not build a backlog, and status must follow the pods",
        sustained,
        lambda r: (
            f"p99 created {_n(op(r, 'p99_created_s'))} / {_n(bare(r, 'p99_created_s'))} s, "
            f"Running -> job Running {_n(op(r, 'p99_running_s'))} s"
        ),
        lambda r: _x(ratio(r, "p99_created_s")),
        _sustained_met,
    ),
    Goal(
        "requests",
        "API requests per normally starting job <= pods + 3",
        "each request is work for the API server and etcd",
        lambda r: op(r, "requests_per_job") is not None,
        lambda r: f"{_n(op(r, 'requests_per_job'), 3)} ({r['operator'].get('requests_by_kind')})",
        lambda r: _x(ratio(r, "requests_per_job")),
        lambda r: _at_most(op(r, "requests_per_job"), int(r["size"]["pods"]) + 3),
    ),
    Goal(
        "events",
        "the operator's Events per such job <= 3",
        "Events are stored and sent to every watcher",
        lambda r: op(r, "events_per_job") is not None,
        lambda r: _n(op(r, "events_per_job")),
        lambda r: "-",
        lambda r: _at_most(op(r, "events_per_job"), 3),
    ),
    Goal(
        "rss",
        "RSS <= 150 MiB at 10,000 pods",
        "a small footprint on a large cluster (the chart's limit is 512 MiB)",
        lambda r: pods(r) >= 10_000,
        lambda r: (
            f"{_n(op(r, 'rss_mib'), 1)} MiB at {pods(r):,} pods, "
            f"peak {_n(op(r, 'peak_rss_mib'), 1)}, 20 s later {_n(op(r, 'settled_rss_mib'), 1)}"
        ),
        lambda r: "-",
        lambda r: _at_most(op(r, "rss_mib"), 150),
    ),
    Goal(
        "cycles",
        "RSS flat within 5% over delete/create cycles",
        "no leak",
        lambda r: _cycle_spread(r) is not None,
        lambda r: f"spread {_n(_cycle_spread(r), 1)}% over {r['size']['cycles']} cycles",
        lambda r: "-",
        lambda r: _at_most(_cycle_spread(r), 5),
    ),
)

FLAT = 1.5  # "flat": CPU per reconcile at the most existing jobs within this of the fewest


def flat_verdict(records: list[Record], changed_at: str) -> tuple[str, str]:
    """CPU per reconcile flat in existing jobs: the newest run of today's code at each
    `--existing` count, at least two counts, the largest within FLAT x the smallest."""
    newest: dict[int, Record] = {}
    for rec in records:
        if rec["size"].get("existing") and todays_code(rec, changed_at):
            newest[int(rec["size"]["existing"])] = rec
    values = [op(r, "cpu_per_reconcile_ms") for r in newest.values()]
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return UNMEASURED, ""
    spread = max(known) / min(known)
    counts = ", ".join(f"{n:,}" for n in sorted(newest))
    return (MET if spread <= FLAT else NOT_MET), f"{spread:.2f}x across {counts} existing jobs"


def newest_verdict(goal: Goal, runs: list[Record], changed_at: str) -> tuple[str, Record | None]:
    """The verdict of the newest run of today's code that tells, and that run."""
    for rec in reversed(runs):
        if todays_code(rec, changed_at) and goal.meets(rec) is not None:
            return (MET if goal.meets(rec) else NOT_MET), rec
    return UNMEASURED, None


def size_verdicts(
    goal: Goal, runs: list[Record], changed_at: str
) -> list[tuple[tuple[int, int], str, Record | None]]:
    """For a goal judged at given sizes: each size's verdict from its own newest run."""
    return [
        (size, *newest_verdict(goal, [r for r in runs if shape(r) == size], changed_at))
        for size in goal.sizes
    ]


def verdict(goal: Goal, runs: list[Record], changed_at: str) -> tuple[str, Record | None]:
    """The goal's verdict, and the run it rests on (the newest, for a goal judged at
    several sizes: met only when met at every one)."""
    if not goal.sizes:
        return newest_verdict(goal, runs, changed_at)
    each = size_verdicts(goal, runs, changed_at)
    said = [v for _, v, _ in each]
    told = [rec for _, _, rec in each if rec is not None]
    newest = max(told, key=lambda r: r["date"]) if told else None
    if NOT_MET in said:
        return NOT_MET, newest
    return (UNMEASURED if UNMEASURED in said else MET), newest


def short(rec: Record) -> str:
    return str(rec["commit"])[:7] + (" (tree changed)" if rec.get("dirty") else "")


def run_row(rec: Record, figure: str, against: str) -> str:
    return f"| {figure} | {against} | {short(rec)} | {rec['date'][:10]} | {table_command(rec)} |"


def machines(records: list[Record]) -> list[str]:
    seen: dict[str, str] = {}
    for rec in records:
        m = rec["machine"]
        key = f"{m['cores']} cores, {m['memory_gib']} GiB, {m['model']}"
        seen.setdefault(key, rec["date"][:10])
    return [f"- {key} (first run {day})" for key, day in seen.items()]


def goal_section(goal: Goal, records: list[Record], changed_at: str) -> list[str]:
    runs = [r for r in records if r["benchmark"] == "bench_create" and goal.applies(r)]
    said, newest = verdict(goal, runs, changed_at)
    lines = [f"### {goal.title}: {said}", "", f"Why: {goal.why}."]
    if goal.sizes:
        each = [
            f"{shape_name(size)} {v}" + (f" ({short(rec)}, {rec['date'][:10]})" if rec else "")
            for size, v, rec in size_verdicts(goal, runs, changed_at)
        ]
        lines[-1] += f" Judged at each size by its newest run of today's code: {', '.join(each)}."
    elif newest is not None:
        lines[-1] += f" Newest run of today's code: {short(newest)}, {newest['date'][:10]}."
    elif runs and (told := [r for r in runs if goal.meets(r) is not None]):
        last = told[-1]
        said_then = MET if goal.meets(last) else NOT_MET
        lines[-1] += f" The newest run, of older code ({short(last)}): {said_then}."
    lines.append("")
    if not runs:
        return [*lines, "No run recorded.", ""]
    lines += [
        "| figure, operator / bare | ratio to the bare client | commit | date | command |",
        "|---|---|---|---|---|",
    ]
    shown = list(reversed(runs))[:MAX_ROWS]
    lines += [run_row(r, goal.figure(r), goal.against_bare(r)) for r in shown]
    if len(runs) > MAX_ROWS:
        lines.append(f"\n{len(runs) - MAX_ROWS} older runs in bench-results/.")
    return [*lines, ""]


def flat_section(records: list[Record], changed_at: str) -> list[str]:
    said, how = flat_verdict(records, changed_at)
    title = "CPU per reconcile flat with 100 / 1,000 / 5,000 existing jobs"
    lines = [
        f"### {title}: {said}",
        "",
        "Why: a pass must not cost more as jobs pile up. Flat here: at every `--existing` "
        f"count within {FLAT}x of each other" + (f" (now {how})." if how else "."),
        "",
    ]
    runs = [r for r in records if r["size"].get("existing")]
    if not runs:
        return [*lines, "No run recorded.", ""]
    lines += [
        "| existing jobs, CPU per reconcile | - | commit | date | command |",
        "|---|---|---|---|---|",
    ]
    for rec in list(reversed(runs))[:MAX_ROWS]:
        figure = f"{rec['size']['existing']:,}: {_n(op(rec, 'cpu_per_reconcile_ms'))} ms"
        lines.append(run_row(rec, figure, "-"))
    return [*lines, ""]


def summary(records: list[Record], changed_at: str) -> list[str]:
    runs = [r for r in records if r["benchmark"] == "bench_create"]
    lines = ["| goal | verdict |", "|---|---|"]
    for goal in GOALS:
        said, _ = verdict(goal, [r for r in runs if goal.applies(r)], changed_at)
        lines.append(f"| [{goal.title}](#{goal.anchor}) | {said} |")
    lines.append(
        f"| CPU per reconcile flat in existing jobs | {flat_verdict(runs, changed_at)[0]} |"
    )
    return [*lines, ""]


def render(records: list[Record], changed_at: str) -> str:
    lines = [INTRO, "## The machines", ""]
    lines += machines(records) or ["No run recorded."]
    notes = sorted({r["note"] for r in records if r.get("note")})
    lines += ["", "Notes of the runs:", ""] + [f"- {n}" for n in notes] if notes else []
    lines += ["", AT_SCALE, "### Goals", "", *summary(records, changed_at)]
    for goal in GOALS:
        lines += [f'<a id="{goal.anchor}"></a>', "", *goal_section(goal, records, changed_at)]
    lines += flat_section(records, changed_at)
    lines += bound_section(records)
    lines += parts_section(records)
    lines += memory_section(records)
    lines.append(OTHERS)
    return "\n".join(lines).rstrip("\n") + "\n"


def generate(folder: Path = RESULTS, repo: Path = REPO) -> str:
    return render(load(folder), operator_changed_at(repo))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args()
    page = generate()
    if args.check:
        if PAGE.read_text() != page:
            print(f"{PAGE.relative_to(REPO)} is out of date: run make docs", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE.relative_to(REPO)} ({len(page.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

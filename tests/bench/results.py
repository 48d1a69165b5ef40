"""A benchmark run's raw results as one JSON file: what docs/benchmarks.md is generated from
(tests/bench/results_page.py).

A record names the code it measured (the commit, and whether the working tree differed
from it, under operator/ in particular), the machine, the date, the exact command and
every figure the run printed. `bench_create.py --results DIR` writes one per run;
`parse_report` reads bench_create's printed report back into the same figures, for a run
whose output was kept but not its record (`python tests/bench/results.py --help`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
from dataclasses import fields
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs/bench-results"
BENCH_CREATE = "bench_create"
Record = dict[str, Any]


def git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@cache
def is_ancestor(older: str, newer: str, repo: Path = REPO) -> bool:
    """Whether commit `older` is `newer` or one of its ancestors (asked once per pair)."""
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", older, newer], cwd=repo, capture_output=True
    )
    return done.returncode == 0


def code_of(checkout: Path = REPO) -> dict[str, Any]:
    """The commit checked out at `checkout`, and the paths that differ from it."""
    changed = [line[3:] for line in git("status", "--porcelain", cwd=checkout).splitlines()]
    return {
        "commit": git("rev-parse", "HEAD", cwd=checkout),
        "dirty": bool(changed),
        "dirty_operator": any(path.startswith("operator/") for path in changed),
        "dirty_trainer": any(path.startswith("images/trainer/") for path in changed),
    }


def machine() -> dict[str, Any]:
    """Cores, memory and CPU model of this machine (Linux)."""
    meminfo = Path("/proc/meminfo").read_text()
    kib = int(re.search(r"MemTotal:\s+(\d+)", meminfo).group(1))  # type: ignore[union-attr]
    model = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(kib / 2**20, 1),
        "model": model.group(1).strip() if model else "unknown",
    }


def clean(value: Any) -> Any:
    """JSON without NaN: an unmeasured figure is null."""
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def figures_dict(figures: Any) -> dict[str, Any] | None:
    """A report.Figures (or None) as the record's figures; the py-spy lines left out."""
    if figures is None:
        return None
    kept = {f.name: getattr(figures, f.name) for f in fields(figures) if f.name != "profile"}
    return dict(clean(kept))


def size_of(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("jobs", "pods", "nodes", "rate", "duration", "existing", "cycles", "dns_names")
    return {key: getattr(args, key) for key in keys}


def record(
    benchmark: str,
    command: str,
    size: dict[str, Any],
    figures: dict[str, Any],
    note: str = "",
    date: datetime | None = None,
    code: dict[str, Any] | None = None,
    machine_info: dict[str, Any] | None = None,
) -> Record:
    when = (date or datetime.now(UTC)).astimezone(UTC)
    return {
        "benchmark": benchmark,
        **(code or code_of()),
        "date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_info or machine(),
        "command": command,
        "note": note,
        "size": size,
        **figures,
    }


def file_name(rec: Record) -> str:
    """<date>-<time>-<commit>-<size>.json: sorted by date, unique per run."""
    day, time = rec["date"][:10], rec["date"][11:16].replace(":", "")
    size = rec["size"]
    shape = f"{size['jobs']}x{size['pods']}"
    if size.get("shape") == "ranks":  # a training benchmark: its most ranks
        shape = f"{size['pods']}ranks"
    if size.get("rate"):
        shape = f"{size['rate']:g}per-s-{size['jobs']}x{size['pods']}"
    for key in ("existing", "cycles"):
        if size.get(key):
            shape += f"-{key}{size[key]}"
    return f"{day}-{time}-{rec['commit'][:7]}-{rec['benchmark']}-{shape}.json"


def write(rec: Record, folder: Path = RESULTS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(rec)
    path.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
    return path


def load_one(path: Path) -> Record:
    rec: Record = json.loads(path.read_text())
    return rec


def load(folder: Path = RESULTS) -> list[Record]:
    """Every record in `folder`, oldest first."""
    records = [load_one(p) for p in sorted(folder.glob("*.json"))]
    return sorted(records, key=lambda r: (r["date"], r["commit"]))


def command_line(argv: list[str]) -> str:
    """The command as run from the repository root, the interpreter left out."""
    script = Path(argv[0]).resolve()
    shown = script.relative_to(REPO) if script.is_relative_to(REPO) else Path(argv[0])
    return shlex.join([str(shown), *argv[1:]])


def recorded_command(script: str, argv: list[str]) -> str:
    """`script` with its arguments as run, `--note` and its text left out (the note is
    recorded beside the command)."""
    kept = argv[: argv.index("--note")] if "--note" in argv else argv
    return command_line([script, *kept])


def table_command(rec: Record) -> str:
    """The run's command as code in a Markdown table cell."""
    command = str(rec["command"])
    return "`" + command.replace("|", "\\|") + "`"


# bench_create's printed report (report.py) read back -----------------------------------

_HEADER = re.compile(
    r"^(?P<jobs>\d+) jobs x (?P<pods>\d+) pods \(\d+ pods\) "
    r"(?:at (?P<rate>[\d.]+) jobs/s|all at once), (?P<nodes>\d+) nodes, "
    r"(?P<existing>\d+) existing jobs, dnsNames (?P<dns>\w+)$"
)
_NUMBER = r"(-?[\d.]+|nan|-)"
_LINE = re.compile(rf"^(?P<label>.+?)\s+{_NUMBER}\S?\s+{_NUMBER}\s+(?:[\d.]+x|-)\s+goal: ")
_LABELS = {
    "jobs/s": "jobs_per_s",
    "p50 submit -> all pods created (s)": "p50_created_s",
    "p99 submit -> all pods created (s)": "p99_created_s",
    "p50 all pods Running -> job Running": "p50_running_s",
    "p99 all pods Running -> job Running": "p99_running_s",
    "API requests per job, Events aside": "requests_per_job",
    "operator Events per job": "events_per_job",
    "CPU per reconcile (ms)": "cpu_per_reconcile_ms",
    "operator CPU per job (ms)": "cpu_per_job_ms",
    "control plane CPU per job (ms)": "control_plane_ms_per_job",
    "control plane idle (cores)": "control_plane_idle_cores",
    "peak RSS (MiB)": "peak_rss_mib",
    "RSS 20 s later, watching (MiB)": "settled_rss_mib",
}


def _number(text: str) -> float | None:
    return None if text in ("-", "nan") else float(text)


def _empty() -> dict[str, Any]:
    from bench.report import Figures

    return dict(figures_dict(Figures()) or {})


def parse_report(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The size and figures ({"operator", "bare", "direct"}) of the last report in
    bench_create's output, as its printed digits give them."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if not starts:
        raise ValueError("no bench_create report found")
    head = _HEADER.match(lines[starts[-1]])
    assert head is not None
    size = {
        "jobs": int(head["jobs"]),
        "pods": int(head["pods"]),
        "nodes": int(head["nodes"]),
        "rate": float(head["rate"] or 0),
        "duration": 0,
        "existing": int(head["existing"]),
        "cycles": 0,
        "dns_names": head["dns"],
    }
    op, bare = _empty(), _empty()
    direct: dict[str, Any] | None = None
    previous = ""
    for line in lines[starts[-1] + 1 :]:
        if line.startswith("against the operator's own objects"):
            direct = _empty()
            continue
        stripped = line.strip()
        if stripped.startswith("(") and stripped.endswith(")") and direct is None:
            _extra(previous, stripped[1:-1], op, bare)
            continue
        if line.startswith("RSS across cycles"):
            previous = "RSS across cycles"
            continue
        if line.startswith("mean waits of the operator"):
            op["waits"] = line.split("(", 2)[-1].rstrip(")")
            continue
        match = _LINE.match(line)
        if not match:
            continue
        label = match["label"].strip()
        previous = label
        key = "rss_mib" if re.fullmatch(r"RSS at \d+ pods \(MiB\)", label) else _LABELS.get(label)
        if key is None:
            continue
        if direct is not None:
            direct[key], op_again = _number(match[3]), _number(match[2])
            assert op_again == op[key], (label, op_again, op[key])
        else:
            op[key], bare[key] = _number(match[2]), _number(match[3])
    size["cycles"] = len(op["cycle_rss_mib"])
    return size, {"operator": op, "bare": bare, "direct": direct}


def _extra(label: str, inner: str, op: dict[str, Any], bare: dict[str, Any]) -> None:
    """The parenthesised line under `label`: the request split, the CPU by program or the
    RSS after each cycle."""
    if label.startswith("API requests per job"):
        op["requests_by_kind"] = inner
    elif label.startswith("control plane CPU per job"):
        for part in inner.split(", "):
            name, _, values = part.partition(" ")
            mine, _, theirs = values.partition(" / ")
            op["control_plane_by_program"][name] = float(mine)
            if theirs:
                bare["control_plane_by_program"][name] = float(theirs)
    elif label.startswith("RSS across"):
        op["cycle_rss_mib"] = [float(v) for v in inner.split(", ")]


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Write a result file from bench_create.py's printed report (its last one)."
    )
    parser.add_argument("report", type=Path, help="the run's output")
    parser.add_argument("--command", required=True, help="the exact command that was run")
    parser.add_argument("--commit", required=True, help="the commit the run measured")
    parser.add_argument("--dirty", action="store_true", help="its tree differed from the commit")
    parser.add_argument("--dirty-operator", action="store_true", help="under operator/ too")
    parser.add_argument("--date", required=True, help="UTC, e.g. 2026-11-28T09:16:42Z")
    parser.add_argument("--duration", type=float, default=0, help="--duration of the run")
    parser.add_argument("--note", default="")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    size, figures = parse_report(args.report.read_text())
    size["duration"] = args.duration
    code = {
        "commit": git("rev-parse", args.commit),
        "dirty": args.dirty,
        "dirty_operator": args.dirty_operator,
    }
    date = datetime.strptime(args.date, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    rec = record(BENCH_CREATE, args.command, size, figures, args.note, date, code)
    print(write(rec, args.results))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "tests"))
    main()

"""The training benchmarks' part of docs/benchmarks.md: host memory at a resume
(tests/bench/bench_resume_memory.py). A goal is "met" only by a run of today's trainer:
at or after the last commit that changed images/trainer/."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from bench.results import REPO, Record, git, is_ancestor, table_command

GOAL = 1.3  # peak rise in resident memory per rank, over the checkpoint's size
MEMORY = """## Host memory at a resume

Goal: while a job resumes from its checkpoint, no rank's resident memory rises by more than
1.3x the checkpoint (one copy, not a pickle of it per rank). `tests/bench/bench_resume_memory.py`
trains a 6.3 M-parameter transformer (Adam: a checkpoint of about 73 MiB) for one step on
CPU ranks (gloo), then resumes each rank in `training.workers.resume_rss`, which reads the
rise of its peak resident memory (VmHWM after clearing it). `--trainer DIR` measures the
trainer package of another checkout with the same measuring code.
`tests/training/test_resume_memory.py` asserts the goal on every run."""


@cache
def trainer_changed_at(repo: Path = REPO) -> str:
    """The last commit that changed the trainer image's package."""
    return git("log", "-1", "--format=%H", "--", "images/trainer/", cwd=repo)


def _todays(rec: Record, changed_at: str, repo: Path = REPO) -> bool:
    """Whether the run measured the trainer as it is now."""
    return is_ancestor(changed_at, rec["commit"], repo) and not rec.get("dirty_trainer")


def verdict(runs: list[Record], changed_at: str) -> str:
    todays = [r for r in runs if _todays(r, changed_at)]
    if not todays:
        return "not measured on today's code"
    newest = todays[-1]
    met = all(max(row["ratios"]) <= GOAL for row in newest["rows"])
    return "met" if met else "not met"


def memory_section(records: list[Record]) -> list[str]:
    runs = [r for r in records if r["benchmark"] == "resume_memory"]
    lines = [MEMORY, ""]
    if not runs:
        return [*lines, "No result file yet.", ""]
    said = verdict(runs, trainer_changed_at())
    lines += [f"At most {GOAL}x per rank: **{said}**.", ""]
    lines += [
        "| run | peak rise / checkpoint, rank 0, 1, ... | checkpoint | commit | date | command |",
        "|---|---|---|---|---|---|",
    ]
    for rec in reversed(runs):  # newest first
        commit = str(rec["commit"])[:7]
        for row in rec["rows"]:
            ratios = ", ".join(f"{r:.2f}x" for r in row["ratios"])
            lines.append(
                f"| {row['run']} | {ratios} | {row['checkpoint_mib']} MiB | {commit} "
                f"| {rec['date'][:10]} | {table_command(rec)} |"
            )
    return [*lines, ""]

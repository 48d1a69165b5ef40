"""docs/benchmarks.md is what tests/bench/results_page.py makes of docs/bench-results/:
figures of recorded runs only, each naming its commit, and a goal "met" only by a run of
today's operator code."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bench import results, results_page, results_plane
from bench.report import Figures, print_report

REPO = Path(__file__).resolve().parents[3]
# Commits of this repository: the first is an ancestor of the second.
OLDER, NEWER = "4b26559", "26bc2f2"


def full(commit: str) -> str:
    return results.git("rev-parse", commit)


def have_history() -> bool:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return False
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return shallow.stdout.strip() == "false"


def test_the_checkout_has_the_history_the_verdicts_read() -> None:
    """The page's verdicts compare the runs' commits with the last change to operator/:
    a shallow clone cannot tell them (clone the repository whole)."""
    assert have_history(), "a git checkout with its whole history is needed"


def test_the_page_is_generated_from_the_result_files() -> None:
    page = results_page.generate()
    assert results_page.PAGE.read_text() == page, (
        "docs/benchmarks.md differs from what tests/bench/results_page.py makes of "
        "docs/bench-results/ (a run added, or a change to operator/ made a verdict stale): "
        "run `make docs` (or .venv/bin/python tests/bench/results_page.py) and commit the page"
    )


def test_the_page_is_a_results_page() -> None:
    assert len(results_page.PAGE.read_text().splitlines()) <= 300


@pytest.mark.parametrize("path", sorted(results.RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_each_result_file_names_its_code_machine_date_and_command(path: Path) -> None:
    rec = results.load_one(path)
    assert re.fullmatch(r"[0-9a-f]{40}", rec["commit"]), rec["commit"]
    assert isinstance(rec["dirty"], bool)
    assert isinstance(rec["dirty_operator"], bool)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rec["date"])
    assert {"cores", "memory_gib", "model"} <= set(rec["machine"])
    assert rec["command"].startswith("tests/bench/")
    assert path.name == results.file_name(rec)
    if rec["benchmark"] == "resume_memory":
        assert all(row["ratios"] and row["checkpoint_mib"] > 0 for row in rec["rows"])
    elif rec["benchmark"] == "bench_plane":
        assert [c["case"] for c in rec["cases"]][:1] == ["pods"]
        assert all(c["ms_per_job"] > 0 for c in rec["cases"])
    else:
        assert rec["operator"]["jobs_per_s"] is not None


def run(
    commit: str, jobs_per_s: float, dirty_operator: bool = False, jobs: int = 200
) -> dict[str, Any]:
    """A bench_create record at `commit` with the bare client at 10 jobs/s."""
    size: dict[str, Any] = {"jobs": jobs, "pods": 8, "nodes": jobs, "rate": 0, "duration": 0}
    size |= {"existing": 0}
    size |= {"cycles": 0, "dns_names": "EveryReplica"}
    return {
        "benchmark": results.BENCH_CREATE,
        "commit": full(commit),
        "dirty": dirty_operator,
        "dirty_operator": dirty_operator,
        "date": "2026-11-28T09:00:00Z",
        "size": size,
        "operator": {"jobs_per_s": jobs_per_s},
        "bare": {"jobs_per_s": 10.0},
    }


JOBS_S = results_page.GOALS[0]
ANY_SIZE = dataclasses.replace(JOBS_S, sizes=())


@pytest.mark.parametrize(
    ("runs", "changed_at", "expected"),
    [
        ([run(NEWER, 9.0)], OLDER, results_page.MET),
        ([run(NEWER, 7.0)], OLDER, results_page.NOT_MET),
        ([run(NEWER, 9.0)], NEWER, results_page.MET),  # the change's own commit
        ([run(OLDER, 9.0)], NEWER, results_page.UNMEASURED),  # older code
        ([run(NEWER, 9.0, dirty_operator=True)], OLDER, results_page.UNMEASURED),
        ([run(NEWER, 9.0), run(NEWER, 7.0)], OLDER, results_page.NOT_MET),  # the newest
        ([], OLDER, results_page.UNMEASURED),
    ],
    ids=[
        "met",
        "not-met",
        "same-commit",
        "older-code",
        "operator-changed-in-tree",
        "newest",
        "none",
    ],
)
def test_a_goal_is_met_only_by_the_newest_run_of_todays_code(
    runs: list[dict[str, Any]], changed_at: str, expected: str
) -> None:
    said, _ = results_page.verdict(ANY_SIZE, runs, full(changed_at))
    assert said == expected


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([run(NEWER, 9.0), run(NEWER, 9.0, jobs=1000)], results_page.MET),
        ([run(NEWER, 9.0), run(NEWER, 7.0, jobs=1000)], results_page.NOT_MET),
        ([run(NEWER, 9.0)], results_page.UNMEASURED),  # nothing at 1,000 x 8
        ([run(NEWER, 7.0)], results_page.NOT_MET),  # one size is enough to fail
        # another size, newer, judges neither
        ([run(NEWER, 9.0), run(NEWER, 9.0, jobs=1000), run(NEWER, 5.0, jobs=1250)], "met"),
        # each size by its own newest run
        ([run(NEWER, 7.0), run(NEWER, 9.0, jobs=1000), run(NEWER, 9.0)], results_page.MET),
    ],
    ids=["both-met", "one-not", "one-missing", "one-not-one-missing", "other-size", "newest"],
)
def test_a_burst_goal_is_judged_at_each_of_its_sizes(
    runs: list[dict[str, Any]], expected: str
) -> None:
    said, _ = results_page.verdict(JOBS_S, runs, full(OLDER))
    assert JOBS_S.sizes == ((200, 8), (1000, 8))
    assert said == expected


def test_a_printed_report_reads_back_as_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(jobs=20, pods=8, rate=0, nodes=20, existing=0, dns_names="Replica0")
    op = Figures(jobs_per_s=7.25, p50_created_s=1.5, p99_created_s=2.125, p99_running_s=0.5)
    op.requests_per_job, op.requests_by_kind = 11.1, "create pods: 8.00, create services: 1.00"
    op.events_per_job, op.cpu_per_reconcile_ms, op.rss_mib = 2.0, 1.75, 91.5
    op.cycle_rss_mib = [90.0, 91.0]
    op.set_control_plane({"kube-apiserver": 179.0, "etcd": 43.0})
    bare = Figures(jobs_per_s=10.0, p50_created_s=1.0, p99_created_s=2.0, requests_per_job=8.0)
    bare.set_control_plane({"kube-apiserver": 93.0, "etcd": 25.0})
    print_report(args, op)  # the operator's figures alone first, as a run prints them
    print_report(args, op, bare)
    size, figures = results.parse_report(capsys.readouterr().out)
    assert size["jobs"] == 20
    assert size["dns_names"] == "Replica0"
    assert size["cycles"] == 2
    expected = {"operator": results.figures_dict(op), "bare": results.figures_dict(bare)}
    for side in ("operator", "bare"):
        for key, value in (expected[side] or {}).items():
            got = figures[side][key]
            if isinstance(value, float):
                assert got is not None, (side, key)
                assert math.isclose(got, value, abs_tol=1e-3), (side, key, got, value)
            else:
                assert got == value, (side, key, got, value)
    assert figures["direct"] is None


def test_a_direct_run_shows_the_operator_against_its_own_objects_sent_straight() -> None:
    rec = run(NEWER, 12.0)
    rec["direct"] = {
        "jobs_per_s": 8.0,
        "control_plane_ms_per_job": 300.0,
        "control_plane_by_program": {"kube-apiserver": 150.0},
    }
    rec["operator"] |= {"control_plane_ms_per_job": 280.0, "cpu_per_job_ms": 30.0}
    rec["bare"] |= {"control_plane_ms_per_job": 120.0}
    rows = [line for line in results_plane.bound_section([rec]) if line.startswith("| 200")]
    assert rows == [
        "| 200 x 8 | 1.50x | 1.20x | 280 / 120 / 300 | - / - / 150 | - / - / - "
        "| - / - / - | - / - / - | 30 ms | 26bc2f2 |"
    ]
    assert "No run" in "".join(results_plane.bound_section([run(NEWER, 12.0)]))


def plane_run(dns_names: str, date: str, pods_ms: float) -> dict[str, Any]:
    def case(name: str, ms: float, writes: dict[str, float]) -> dict[str, Any]:
        programs = {"kube-apiserver": ms / 2, "etcd": ms / 4}
        figures = {"ms_per_job": ms, "by_program": programs, "writes_per_job": writes}
        return {"case": name, "seconds": 20.0, **figures}

    return {
        "benchmark": "bench_plane",
        "commit": full(NEWER),
        "date": date,
        "command": "tests/bench/bench_plane.py --jobs 200",
        "size": {"jobs": 200, "pods": 8, "nodes": 200, "dns_names": dns_names},
        "cases": [
            case("pods", pods_ms, {"POST pods": 8.0, "PATCH pods/status": 16.0}),
            case("pods+service", 2 * pods_ms, {"POST endpoints": 1.0, "PUT endpoints": 5.5}),
        ],
    }


def test_the_plane_section_prices_each_part_against_the_bare_pods() -> None:
    runs = [
        plane_run("EveryReplica", "2026-11-28T09:00:00Z", 100.0),
        plane_run("EveryReplica", "2026-11-28T10:00:00Z", 120.0),  # the newer one shows
        plane_run("Replica0", "2026-11-28T11:00:00Z", 110.0),
    ]
    lines = results_plane.parts_section(runs)
    rows = [line for line in lines if line.startswith("| pods")]
    assert rows == [
        "| pods | 120 (1.00x) | 60 | 0 | 30 | 0 | 24.0 | 0.0 | 20.0 |",
        "| pods+service | 240 (2.00x) | 120 | 0 | 60 | 0 | 0.0 | 6.5 | 20.0 |",
        "| pods | 110 (1.00x) | 55 | 0 | 28 | 0 | 24.0 | 0.0 | 20.0 |",
        "| pods+service | 220 (2.00x) | 110 | 0 | 55 | 0 | 0.0 | 6.5 | 20.0 |",
    ]
    assert sum("spec.dnsNames: Replica0" in line for line in lines) == 1
    assert "No result file yet." in results_plane.parts_section([run(NEWER, 12.0)])

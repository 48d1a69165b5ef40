"""Benchmark: a resume's host memory per rank, against the checkpoint's size.

Not a test (tests/training/test_resume_memory.py asserts the goal): it prints, for the
runs below, each rank's peak rise in resident memory while it resumes divided by the
checkpoint's size, and with `--results DIR` writes them as a result file for
docs/benchmarks.md (tests/bench/results_page.py). Goal: at most 1.3x per rank.

    .venv/bin/python tests/bench/bench_resume_memory.py --results docs/bench-results

`--trainer DIR` measures another checkout's trainer package (DIR/images/trainer), e.g. a
worktree of an older commit, with this checkout's measuring code; its runs that the old
trainer cannot do (no --sharding) are left out.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results

from training.resume_memory import RESUME_GOAL, ddp_flags, resume_growth_mib

BENCHMARK = "resume_memory"
# (name, entrypoint, ranks, --sharding: "" for none given; the pipeline takes its flags)
RUNS = [
    ("DDP", "multigpu_train.ddp", 2, ""),
    ("FSDP2 full", "multigpu_train.ddp", 2, "full"),
    ("pipeline, 2 stages", "multigpu_train.pipeline", 2, ""),
    ("pipeline, 4 stages", "multigpu_train.pipeline", 4, ""),
]


def measure(has_sharding: bool) -> list[dict[str, Any]]:
    """Each run's peak rise per rank over the checkpoint's size."""
    rows = []
    for name, module, ranks, sharding in RUNS:
        if sharding and not has_sharding:
            continue  # an older trainer: no sharded data parallel to measure
        with tempfile.TemporaryDirectory() as tmp:
            if module.endswith("pipeline"):
                grown, size = resume_growth_mib(Path(tmp), ranks)
            else:
                flags = ddp_flags(sharding or ("none" if has_sharding else None))
                grown, size = resume_growth_mib(Path(tmp), ranks, module, flags)
        ratios = [round(g / size, 2) for g in grown]
        rows.append(
            {"run": name, "ranks": ranks, "checkpoint_mib": round(size, 1), "ratios": ratios}
        )
        print(f"{name:<20} checkpoint {size:6.1f} MiB   peak rise / checkpoint per rank {ratios}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer", type=Path, help="a checkout whose trainer package to measure")
    parser.add_argument("--results", type=Path, help="write a result file into this folder")
    parser.add_argument("--note", default="", help="said beside the run on the page")
    args = parser.parse_args()
    checkout = results.REPO
    if args.trainer:
        checkout = args.trainer.resolve()
        trainer = str(checkout / "images/trainer")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [trainer, os.environ.get("PYTHONPATH")])
        )
    has_sharding = (checkout / "images/trainer/multigpu_train/sharding.py").exists()
    rows = measure(has_sharding)
    print(f"goal: <= {RESUME_GOAL}x per rank")
    if args.results:
        command = results.recorded_command("tests/bench/bench_resume_memory.py", sys.argv[1:])
        size = {"jobs": 1, "pods": max(r["ranks"] for r in rows), "shape": "ranks"}
        rec = results.record(
            BENCHMARK, command, size, {"rows": rows}, args.note, code=results.code_of(checkout)
        )
        print(f"wrote {results.write(rec, args.results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

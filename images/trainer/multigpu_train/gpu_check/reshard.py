"""The sharded checkpoint run: FSDP2 training saves DCP checkpoints, and a second job
resumes from them at another world size (half the GPUs), as an elastic job that lost
nodes does. On one GPU the second job has the same world size: saved and resumed, not
resharded (the run's text says so).
"""

from __future__ import annotations

import re
import tempfile
import time

from multigpu_train.gpu_check.runs import (
    EXTRA_RUNS,
    Outcome,
    Run,
    Target,
    flags,
    run,
    tail,
    torchrun,
)

NAME = EXTRA_RUNS[2]


def dcp_run(target: Target) -> Outcome:
    started = time.monotonic()
    first = target.count
    second = max(first // 2, 1)
    half = "bf16" if target.bf16 else "fp32"
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as directory:

        def job(processes: int, epochs: int) -> Outcome:
            command = torchrun(
                processes,
                "multigpu_train.ddp",
                *flags(target, "--sharding", "full", "--precision", half),
                "--epochs", str(epochs), "--checkpoint-every-steps", "10",
                "--checkpoint-dir", directory,
            )  # fmt: skip
            return run(Run(f"{NAME}, {processes} process(es)", command, target.env))

        saved = job(first, 1)
        if not saved.ok:
            return Outcome(NAME, False, time.monotonic() - started, saved.detail, saved.output)
        resumed = job(second, 2)
    seconds = time.monotonic() - started
    expected = rf"resumed from epoch 1 \(checkpoint of world size {first}, now {second}\)"
    if not resumed.ok or re.search(expected, resumed.output) is None:
        why = (
            resumed.detail if not resumed.ok else f"not resumed as expected\n{tail(resumed.output)}"
        )
        return Outcome(NAME, False, seconds, why, resumed.output)
    how = "resharded" if second != first else "same world size: not resharded"
    return Outcome(NAME, True, seconds, f"saved by {first}, resumed by {second} ({how})")

"""A trainer entrypoint that prints how far its resident memory rose while it resumed.

Usage: python -m training.workers.resume_rss MODULE [FLAGS...]

Linux: writing 5 to /proc/self/clear_refs resets the peak (VmHWM) to the current
resident size, so the peak read after the resume is the resume's own.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(field)


def _resuming() -> Any:
    """The class whose `resume` loads the checkpoint: the CheckpointManager, or in a
    trainer from before it (tests/bench/bench_resume_memory.py --trainer), the Trainer."""
    try:
        from multigpu_train.checkpoint_manager import CheckpointManager
    except ImportError:
        from multigpu_train.trainer import Trainer

        return Trainer
    return CheckpointManager


def main() -> None:
    module, flags = sys.argv[1], sys.argv[2:]
    owner = _resuming()
    resume = owner.resume

    def measured(self: Any) -> None:
        Path("/proc/self/clear_refs").write_text("5")
        before = _kib("VmRSS")
        resume(self)
        print(f"resume peak rss growth kib={_kib('VmHWM') - before}", flush=True)

    owner.resume = measured
    sys.argv = [module, *flags]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

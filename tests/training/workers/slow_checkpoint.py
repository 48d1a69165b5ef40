"""A trainer entrypoint whose first checkpoint write takes SLOW_SAVE_SECONDS longer,
as a large model on a slow volume would.

Usage: python -m training.workers.slow_checkpoint MODULE [FLAGS...]
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path

from multigpu_train import checkpoint


def main() -> None:
    module, flags = sys.argv[1], sys.argv[2:]
    delay = float(os.environ["SLOW_SAVE_SECONDS"])
    save = checkpoint.save
    slowed: list[Path] = []

    def slow_save(directory: Path, state: checkpoint.State) -> Path:
        if not slowed:
            slowed.append(directory)
            time.sleep(delay)
        return save(directory, state)

    checkpoint.save = slow_save
    sys.argv = [module, *flags]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

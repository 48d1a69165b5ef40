"""A trainer entrypoint whose rank 0 dies in its FAIL_AT_PUBLISH-th sharded save after
every rank wrote its shards, just before the save would become the latest: a pod
killed mid-save.

Usage: python -m training.workers.failing_publish MODULE [FLAGS...]
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from multigpu_train import checkpoint_layout


def main() -> None:
    module, flags = sys.argv[1], sys.argv[2:]
    fail_at = int(os.environ["FAIL_AT_PUBLISH"])
    publish = checkpoint_layout.publish
    calls = [0]

    def dying_publish(directory: Path, name: str) -> None:
        calls[0] += 1
        if calls[0] == fail_at:
            print(f"killed before publishing {name}", flush=True)
            os._exit(137)
        publish(directory, name)

    checkpoint_layout.publish = dying_publish
    sys.argv = [module, *flags]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

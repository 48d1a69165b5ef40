"""Write the generated manifests from their Python source.

Run from the repository root after changing the API (any module of api/ but names.py,
validation.py and cel.py):

    python -m multigpu_operator.api.gen

The CRDs (the job's, api/crd.py; the runtimes', api/runtime_crd.py) go to the kustomize
base and to the Helm chart's crds/; tests/unit/api/test_crd.py, tests/unit/chart/test_chart_crd.py
and tests/unit/api/test_runtime_crd.py fail while a file differs from its source.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from multigpu_operator.api.crd import write_crd
from multigpu_operator.api.runtime_crd import write_runtime_crds

CRD_PATH = Path("manifests/crd/multigpu.dev_multigpujobs.yaml")
CHART_CRD_PATH = Path("charts/multigpu-operator/crds/multigpu.dev_multigpujobs.yaml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m multigpu_operator.api.gen", description="Write the generated manifests."
    )
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="repository root (default: current dir)"
    )
    args = parser.parse_args(argv)
    root: Path = args.root
    # Refuse to scatter a manifests/ tree wherever the command happens to run.
    if not (root / "manifests").is_dir():
        parser.error(f"{root} has no manifests/ directory: run from the repository root")
    for relative in (CRD_PATH, CHART_CRD_PATH):
        path = root / relative
        write_crd(path)
        print(f"wrote {path}")
        for written in write_runtime_crds(path.parent):
            print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

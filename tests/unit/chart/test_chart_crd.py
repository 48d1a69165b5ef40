"""The chart's CRD and the kustomize base's CRD are both generated from api/crd.py."""

from __future__ import annotations

from pathlib import Path

from multigpu_operator.api.crd import crd_yaml
from multigpu_operator.api.gen import CHART_CRD_PATH, CRD_PATH, main

REPO = Path(__file__).resolve().parents[3]


def test_the_chart_and_the_kustomize_base_hold_the_generated_crd() -> None:
    expected = crd_yaml()
    for path in (CRD_PATH, CHART_CRD_PATH):
        assert (REPO / path).read_text() == expected, (
            f"{path} is stale: run `python -m multigpu_operator.api.gen`"
        )


def test_gen_writes_both_copies(tmp_path: Path) -> None:
    (tmp_path / "manifests").mkdir()
    assert main(["--root", str(tmp_path)]) == 0
    for path in (CRD_PATH, CHART_CRD_PATH):
        assert (tmp_path / path).read_text() == crd_yaml()

"""The status write's merge patch (actuator/status.py merge_patch): what a previous
status loses is sent as null at any depth, since a JSON merge patch keeps what it does not
mention."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.actuator.status import merge_patch
from support.fake_api_rules import apply_merge_patch


@pytest.mark.parametrize(
    ("before", "after", "patch"),
    [
        pytest.param({}, {"phase": "Running"}, {"phase": "Running"}, id="new-key"),
        pytest.param({"reason": "X", "phase": "Running"}, {"phase": "Running"},
                     {"reason": None, "phase": "Running"}, id="top-level-removed"),
        pytest.param({"progress": {"step": 1, "eta": "4s"}}, {"progress": {"step": 9}},
                     {"progress": {"step": 9, "eta": None}}, id="nested-removed"),
        pytest.param({"progress": {"step": 1}}, {}, {"progress": None}, id="object-removed"),
        pytest.param({"conditions": [{"type": "A"}, {"type": "B"}]},
                     {"conditions": [{"type": "A"}]}, {"conditions": [{"type": "A"}]},
                     id="lists-replace"),
        pytest.param({"progress": "old"}, {"progress": {"step": 1}},
                     {"progress": {"step": 1}}, id="scalar-to-object"),
    ],
)  # fmt: skip
def test_merge_patch_turns_before_into_after(
    before: dict[str, Any], after: dict[str, Any], patch: dict[str, Any]
) -> None:
    assert merge_patch(before, after) == patch
    assert apply_merge_patch(before, patch) == after  # applied as the API server applies it

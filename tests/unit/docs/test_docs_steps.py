"""The docs' lists of reconcile steps are `reconcile.STEPS`: the same steps, in order."""

from __future__ import annotations

import re
from pathlib import Path

from multigpu_operator import reconcile

ROOT = Path(__file__).resolve().parents[3]


def _steps() -> list[str]:
    """Each step as `module.function`, module relative to policy/."""
    return [f"{step.__module__.rsplit('.', 1)[-1]}.{step.__name__}" for step in reconcile.STEPS]


def test_architecture_lists_every_step_in_order() -> None:
    text = (ROOT / "docs/architecture.md").read_text()
    start = text.index("## Reconcile as named steps")
    section = text[start : text.index("\n## ", start + 1)]
    items = re.findall(r"^(\d+)\. `(\w+\.\w+)`", section, re.MULTILINE)
    assert [int(number) for number, _ in items] == list(range(1, len(items) + 1))
    assert [step for _, step in items] == _steps()


def test_lifecycle_names_the_step_modules_in_order() -> None:
    text = (ROOT / "docs/lifecycle.md").read_text()
    # "... one module per rule in `operator/multigpu_operator/policy/` (`cleanup`, ...)"
    listed = re.search(r"policy/steps/` \((.*?)\)\.\n", text, re.DOTALL)
    assert listed
    modules = {step.split(".")[0] for step in _steps()}
    named = [m for m in re.findall(r"`(\w+)`", listed.group(1)) if m in modules]
    assert named == [step.split(".")[0] for step in _steps()]

"""The operator process does not load the offline validator's libraries (cel-python,
jsonschema and theirs: 14 MiB and 170 modules of an idle operator's RSS) until a job
names a runtime: api/runtime_merge.py imports the validator on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

OPERATOR = Path(__file__).resolve().parents[3] / "operator"
HEAVY = ("celpy", "jsonschema", "openapi_schema_validator", "lark", "pendulum")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(OPERATOR)},
        capture_output=True,
        text=True,
        check=True,
    )
    return {name.split(".")[0] for name in out.stdout.split()}


def test_the_operator_starts_without_the_validator() -> None:
    loaded = _loaded_after("import multigpu_operator.__main__, multigpu_operator.handlers")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_a_merge_with_a_runtime_loads_it() -> None:
    statement = (
        "from multigpu_operator.api.runtime_merge import RuntimeProblems, merged_job\n"
        "try:\n"
        "    merged_job({'metadata': {'name': 'j'}, 'spec': {}}, {'replicas': 2}, 'r')\n"
        "except RuntimeProblems:\n"
        "    pass"
    )
    assert "celpy" in _loaded_after(statement)

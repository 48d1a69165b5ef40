"""The operator's defaults are declared once, in settings.py's Settings; the YAML and the
docs that repeat them (the chart's values.yaml, the kustomize Deployment, the docs'
tables and sentences) are held to them here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator import settings as settings_module
from multigpu_operator.settings import Settings

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts/multigpu-operator"
# The variables Settings.from_env reads, found in its source (a new one is checked too).
VARIABLES = sorted(set(re.findall(r'"(MGJ_[A-Z_]+)"', Path(settings_module.__file__).read_text())))
# `- name: MGJ_X` followed by `value: {{ .Values.a.b | quote }}` in the chart's template.
CHART_ENV = re.compile(r"- name: (MGJ_[A-Z_]+)\s+value: \{\{ \.Values\.([\w.]+) \| quote \}\}")


@pytest.fixture(autouse=True)
def no_operator_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def given(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    """Settings.from_env with these variables (and no other MGJ_* one) set."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


def test_the_settings_read_variables() -> None:
    assert "MGJ_WORKERS" in VARIABLES
    assert "MGJ_LEASE_DURATION_SECONDS" in VARIABLES


def test_an_empty_environment_gives_the_declared_defaults() -> None:
    assert Settings.from_env() == Settings()


def test_the_chart_values_are_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each value the chart's Deployment passes as a variable, at its values.yaml default,
    reads as the operator's own default."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    template = (CHART / "templates/deployment.yaml").read_text()
    passed = CHART_ENV.findall(template)
    assert {name for name, _ in passed} >= {"MGJ_WORKERS", "MGJ_PROGRESS_WRITES_PER_SECOND"}
    env = {}
    for name, path in passed:
        value: Any = values
        for part in path.split("."):
            value = value[part]
        env[name] = str(value).lower() if isinstance(value, bool) else str(value)
    assert given(monkeypatch, env) == Settings()


def test_the_kustomize_deployment_spells_out_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = yaml.safe_load((REPO / "manifests/operator/deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if e["name"] in VARIABLES}
    assert "MGJ_LEASE_DURATION_SECONDS" in env
    # The Lease's namespace is where the manifests install the operator, not a default.
    namespace = env.pop("MGJ_LEASE_NAMESPACE")
    assert given(monkeypatch, env) == Settings()
    assert deployment["metadata"].get("namespace", namespace) == namespace


def documented_defaults() -> list[tuple[str, str, str]]:
    """(file, variable, default) for each default the docs state: a table row
    `| ... | `MGJ_X` | 10 | ...`, or a sentence's "`MGJ_X` (600)", "`MGJ_X`, default 2",
    "`MGJ_X` (2 s)"."""
    names = "|".join(VARIABLES)
    row = re.compile(rf"\| `({names})` \| `?(\w+(?:\.\d+)?)`? \|")
    prose = re.compile(rf"`({names})`(?:,? default |,? \(| \(default )(\d+(?:\.\d+)?)\b")
    found = []
    for doc in sorted([*(REPO / "docs").glob("*.md"), REPO / "README.md"]):
        text = doc.read_text()
        found += [(doc.name, name, value) for name, value in row.findall(text)]
        found += [(doc.name, name, value) for name, value in prose.findall(text)]
    return found


def test_the_docs_state_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    found = documented_defaults()
    stated = {name for _, name, _ in found}
    assert {"MGJ_LEASE_DURATION_SECONDS", "MGJ_WORKERS", "MGJ_RETRY_BASE_SECONDS"} <= stated
    wrong = []
    for doc, name, value in found:
        with monkeypatch.context() as env:
            if given(env, {name: value}) != Settings():
                wrong.append(f"{doc}: {name} {value}")
    assert wrong == []

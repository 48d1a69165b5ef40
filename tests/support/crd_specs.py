"""Job specs for the offline validation tests (tests/unit/api/test_crd*.py): a valid spec of each
kind with some fields replaced, a field's schema, and which of the CRD's rules a table of
refusals covers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from multigpu_operator.api.rules import Rule
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.validation import validate

# (id, spec, name, the field named, its message or a substring of it)
Refused = tuple[str, dict[str, Any], str, str, str]

TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "busybox:1.36"}]}}
ELASTIC = {"minReplicas": 1, "maxReplicas": 4}
OOM = {"onReasons": ["OOMKilled"]}
RULES = "spec.runPolicy.failurePolicy.rules"


def spec(**fields: Any) -> dict[str, Any]:
    """A valid DistributedDataParallel spec with `fields` replaced."""
    return {"mode": "DistributedDataParallel", "template": TEMPLATE, **fields}


def rules(*listed: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A spec with these spec.runPolicy.failurePolicy.rules."""
    return spec(runPolicy={"failurePolicy": {"rules": list(listed)}}, **fields)


def elastic(**fields: Any) -> dict[str, Any]:
    """A valid Elastic spec (2 pods, 1..4) with `fields` replaced."""
    base: dict[str, Any] = {"replicas": 2, "elastic": {"minReplicas": 1, "maxReplicas": 4}}
    return spec(mode="Elastic", **{**base, **fields})


def prop(path: str) -> dict[str, Any]:
    """The schema of a spec field, by dotted path ("elastic.maxRestarts")."""
    node = spec_schema()
    for key in path.split("."):
        node = node["properties"][key]
    return node


def untested(rules: Iterable[Rule], messages: set[str]) -> list[str]:
    """The offline rules no expected message in `messages` stands for. A rule with a
    messageExpression is known by what it says (its first words); a transition rule needs
    stored state, so a real API server tests it (tests/integration/test_api_validation.py)."""
    missing = []
    for rule in rules:
        if rule.transition:
            continue
        if rule.message_expression is None:
            if rule.message not in messages:
                missing.append(rule.message)
        else:
            opening = rule.message_expression.split("%")[0].strip("'")
            if not any(opening in expected for expected in messages):
                missing.append(opening)
    return missing


def refused_cases(table: list[Refused]) -> pytest.MarkDecorator:
    """A test run once per refused spec of `table`, named by its id."""
    return pytest.mark.parametrize(
        ("raw", "name", "field", "expected"), [c[1:] for c in table], ids=[c[0] for c in table]
    )


def assert_refused(raw: dict[str, Any], name: str, field: str, expected: str) -> None:
    """Offline validation refuses `raw` naming `field` with (a message holding) `expected`."""
    problems = validate(raw, name)
    assert any(p.field == field and expected in p.message for p in problems), problems

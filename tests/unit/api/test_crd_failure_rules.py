"""Offline validation of spec.runPolicy.failurePolicy.rules (api/failure_policy_rules.py):
valid rule lists pass, and each invalid one is refused naming its field with the rule's
message. The rest of the spec: tests/unit/api/test_crd.py."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.failure_policy_rules import (
    FAILURE_POLICY_RULES,
    MSG_FAILURE_RULE_EMPTY,
    MSG_FAILURE_RULE_FAULTS,
    MSG_FAILURE_RULE_IGNORE,
    MSG_FAILURE_RULE_MAX_RESTARTS,
    MSG_FAILURE_RULE_NAMES,
)
from multigpu_operator.api.validation import validate
from support.crd_specs import (
    ELASTIC,
    OOM,
    RULES,
    Refused,
    assert_refused,
    elastic,
    refused_cases,
    rules,
    untested,
)

VALID: list[tuple[str, dict[str, Any]]] = [
    (
        "failure-rules",
        rules(
            {"name": "oom", "action": "FailJob", **OOM},
            {
                "action": "RestartJob",
                "maxRestarts": 2,
                "onExitCodes": {"operator": "NotIn", "values": [1, 2]},
            },
            {"action": "RestartJobNotCounted", "onFaults": ["NodeLost", "GPUUnhealthy"]},
            {"name": "disrupted", "action": "FailJob", "onPodConditions": ["DisruptionTarget"]},
        ),
    ),
    (
        "elastic-ignore",
        elastic(runPolicy={"failurePolicy": {"rules": [{"action": "Ignore", **OOM}]}}),
    ),
]


@pytest.mark.parametrize("raw", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid(raw: dict[str, Any]) -> None:
    assert validate(raw, "j") == []


INVALID: list[Refused] = [
    ("rule-empty", rules({"action": "FailJob"}), "j", RULES, MSG_FAILURE_RULE_EMPTY),
    (
        "rule-fail-with-max-restarts",
        rules({"action": "FailJob", "maxRestarts": 2, **OOM}),
        "j",
        RULES,
        MSG_FAILURE_RULE_MAX_RESTARTS,
    ),
    (
        "rule-ignore-with-max-restarts",
        rules({"action": "Ignore", "maxRestarts": 2, **OOM}, mode="Elastic", elastic=ELASTIC),
        "j",
        RULES,
        MSG_FAILURE_RULE_MAX_RESTARTS,
    ),
    (
        "rule-fault-and-exit-code",
        rules(
            {
                "action": "RestartJob",
                "onFaults": ["NodeLost"],
                "onExitCodes": {"operator": "In", "values": [1]},
            }
        ),
        "j",
        RULES,
        MSG_FAILURE_RULE_FAULTS,
    ),
    (
        "rule-fault-and-reason",
        rules({"action": "RestartJob", "onFaults": ["GPUUnhealthy"], **OOM}),
        "j",
        RULES,
        MSG_FAILURE_RULE_FAULTS,
    ),
    (
        "rule-ignore-not-elastic",
        rules({"action": "Ignore", "onPodConditions": ["DisruptionTarget"]}),
        "j",
        RULES,
        MSG_FAILURE_RULE_IGNORE,
    ),
    (
        "rule-names-twice",
        rules(
            {"name": "oom", "action": "FailJob", **OOM},
            {"name": "oom", "action": "RestartJob", "onReasons": ["Error"]},
        ),
        "j",
        RULES,
        MSG_FAILURE_RULE_NAMES,
    ),
    ("rules-none", rules(), "j", RULES, "should be non-empty"),
    (
        "rule-no-reasons",
        rules({"action": "FailJob", "onReasons": []}),
        "j",
        f"{RULES}[0].onReasons",
        "should be non-empty",
    ),
]


@refused_cases(INVALID)
def test_invalid(raw: dict[str, Any], name: str, field: str, expected: str) -> None:
    assert_refused(raw, name, field, expected)


def test_every_rule_has_an_invalid_case() -> None:
    assert untested(FAILURE_POLICY_RULES, {c[4] for c in INVALID}) == []

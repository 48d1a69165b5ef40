"""The verdict on one failure: the first matching failure-policy rule, else the default
rules, each with its budget (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from multigpu_operator.api.failure_policy import FailureAction, Fault
from multigpu_operator.policy.failures.failed_pods import Failure
from multigpu_operator.policy.failures.faults import Diagnosis
from multigpu_operator.policy.failures.rules import (
    BACKOFF_RULE,
    INFRASTRUCTURE_RULE,
    RESTART_POLICY_RULE,
    judge,
)
from multigpu_operator.policy.step import Progress
from support.policy import job, progress

RULES = "spec.runPolicy.failurePolicy.rules"


def exit_code(code: int, reason: str = "Error") -> Failure:
    return Failure("job-1", "1", code, reason, reasons=(reason,))


def fault(kind: Fault, node: str = "gpu-node-3") -> Failure:
    return Failure("job-1", "1", None, "disrupted", disrupted=True, diagnosis=Diagnosis(kind, node))


OOM = exit_code(137, "OOMKilled")
LOST = fault(Fault.NODE_LOST)
DISRUPTED = replace(fault(Fault.EVICTED), conditions=("DisruptionTarget",))
SETUP = Failure("job-1", "1", 78, "SetupError", setup_error=True)
STALLED = fault(Fault.STALLED, "")


def rules(*listed: dict[str, Any], **run_policy: Any) -> dict[str, Any]:
    return {"failurePolicy": {"rules": list(listed)}, **run_policy}


def counts(p: Progress) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    return p.restarts, p.infrastructure_restarts, p.rule_restarts


@pytest.mark.parametrize(
    ("run_policy", "failure", "before", "action", "rule", "fail_reason", "after"),
    [
        # The default rules: what restartPolicy and backoffLimit always meant.
        pytest.param({}, OOM, progress(), "RestartJob", BACKOFF_RULE, "", (1, 0, ()), id="counted"),
        pytest.param(
            {"backoffLimit": 1},
            OOM,
            progress(restarts=1),
            "FailJob",
            BACKOFF_RULE,
            "BackoffLimitExceeded",
            (1, 0, ()),
            id="backoff-used-up",
        ),
        pytest.param(
            {"restartPolicy": "Never"},
            OOM,
            progress(),
            "FailJob",
            RESTART_POLICY_RULE,
            "PodFailed",
            (0, 0, ()),
            id="never",
        ),
        # A stall the watchdog restarts from: counted, whatever the exit-code policy says.
        pytest.param(
            {}, STALLED, progress(), "RestartJob", BACKOFF_RULE, "", (1, 0, ()), id="stall-counted"
        ),
        pytest.param(
            {"restartPolicy": "ExitCode"},
            STALLED,
            progress(),
            "RestartJob",
            BACKOFF_RULE,
            "",
            (1, 0, ()),
            id="stall-under-exit-code",
        ),
        pytest.param(
            {"backoffLimit": 0},
            STALLED,
            progress(),
            "FailJob",
            BACKOFF_RULE,
            "BackoffLimitExceeded",
            (0, 0, ()),
            id="stall-backoff-used-up",
        ),
        pytest.param(
            {"restartPolicy": "Never"},
            STALLED,
            progress(),
            "FailJob",
            RESTART_POLICY_RULE,
            "Stalled",
            (0, 0, ()),
            id="stall-never",
        ),
        pytest.param(
            rules({"action": "RestartJobNotCounted", "onFaults": ["Stalled"], "maxRestarts": 2}),
            STALLED,
            progress(),
            "RestartJobNotCounted",
            f"{RULES}[0]",
            "",
            (0, 0, ((0, 1),)),
            id="stall-rule",
        ),
        pytest.param(
            rules({"action": "RestartJobNotCounted", "onFaults": ["Evicted"]}),
            STALLED,
            progress(),
            "RestartJob",
            BACKOFF_RULE,
            "",
            (1, 0, ()),
            id="stall-other-fault-rule",
        ),
        pytest.param(
            {"restartPolicy": "Never"},
            LOST,
            progress(),
            "FailJob",
            RESTART_POLICY_RULE,
            "PodFailed",
            (0, 0, ()),
            id="never-even-for-a-fault",
        ),
        pytest.param(
            {"restartPolicy": "ExitCode"},
            exit_code(1),
            progress(),
            "FailJob",
            RESTART_POLICY_RULE,
            "NonRetryableExitCode",
            (0, 0, ()),
            id="exitcode-not-retried",
        ),
        pytest.param(
            {},
            SETUP,
            progress(),
            "FailJob",
            RESTART_POLICY_RULE,
            "SetupError",
            (0, 0, ()),
            id="setup-error",
        ),
        # Infrastructure faults: their own budget.
        pytest.param(
            {"backoffLimit": 0},
            LOST,
            progress(),
            "RestartJobNotCounted",
            INFRASTRUCTURE_RULE,
            "",
            (0, 1, ()),
            id="node-lost-not-counted",
        ),
        pytest.param(
            {"infrastructureRetries": 2},
            fault(Fault.GPU_UNHEALTHY),
            replace(progress(), infrastructure_restarts=2),
            "FailJob",
            INFRASTRUCTURE_RULE,
            "InfrastructureRetriesExceeded",
            (0, 2, ()),
            id="infrastructure-retries-used-up",
        ),
        pytest.param(
            {},
            fault(Fault.STALLED),
            progress(),
            "RestartJob",
            BACKOFF_RULE,
            "",
            (1, 0, ()),
            id="a-stall-is-not-an-infrastructure-fault",
        ),
        # The user's rules, first match wins.
        pytest.param(
            rules({"action": "RestartJobNotCounted", "maxRestarts": 2, "onFaults": ["Stalled"]}),
            fault(Fault.STALLED),
            progress(),
            "RestartJobNotCounted",
            f"{RULES}[0]",
            "",
            (0, 0, ((0, 1),)),
            id="a-stall-reported-by-a-later-step-matches-stalled",
        ),
        pytest.param(
            rules({"name": "oom", "action": "FailJob", "onReasons": ["OOMKilled"]}),
            OOM,
            progress(),
            "FailJob",
            f"{RULES}[0] (oom)",
            "FailurePolicy",
            (0, 0, ()),
            id="fail-on-oom",
        ),
        pytest.param(
            rules(
                {
                    "action": "RestartJobNotCounted",
                    "onExitCodes": {"operator": "In", "values": [137]},
                },
                {"action": "FailJob", "onReasons": ["OOMKilled"]},
            ),
            OOM,
            progress(),
            "RestartJobNotCounted",
            f"{RULES}[0]",
            "",
            (0, 1, ()),
            id="first-match-wins",
        ),
        pytest.param(
            rules({"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [137]}}),
            OOM,
            progress(),
            "RestartJob",
            BACKOFF_RULE,
            "",
            (1, 0, ()),
            id="no-match-falls-to-the-defaults",
        ),
        pytest.param(
            rules({"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [137]}}),
            LOST,
            progress(),
            "RestartJobNotCounted",
            INFRASTRUCTURE_RULE,
            "",
            (0, 1, ()),
            id="no-exit-code-matches-neither-in-nor-notin",
        ),
        pytest.param(
            rules({"action": "FailJob", "onPodConditions": ["DisruptionTarget"]}),
            DISRUPTED,
            progress(),
            "FailJob",
            f"{RULES}[0]",
            "FailurePolicy",
            (0, 0, ()),
            id="pod-condition",
        ),
        pytest.param(
            rules({"action": "FailJob", "onFaults": ["Preempted"]}),
            LOST,
            progress(),
            "RestartJobNotCounted",
            INFRASTRUCTURE_RULE,
            "",
            (0, 1, ()),
            id="another-fault-does-not-match",
        ),
        pytest.param(
            rules({"action": "RestartJob", "onFaults": ["NodeLost"]}),
            LOST,
            progress(),
            "RestartJob",
            f"{RULES}[0]",
            "",
            (1, 0, ()),
            id="a-fault-counted-by-a-rule",
        ),
        pytest.param(
            rules({"action": "RestartJob", "maxRestarts": 2, "onReasons": ["OOMKilled"]}),
            OOM,
            replace(progress(), rule_restarts=((0, 1),)),
            "RestartJob",
            f"{RULES}[0]",
            "",
            (1, 0, ((0, 2),)),
            id="rule-budget-and-backoff-both-count",
        ),
        pytest.param(
            rules({"action": "RestartJobNotCounted", "maxRestarts": 2, "onReasons": ["OOMKilled"]}),
            OOM,
            replace(progress(), rule_restarts=((0, 2),)),
            "FailJob",
            f"{RULES}[0]",
            "MaxRestartsExceeded",
            (0, 0, ((0, 2),)),
            id="rule-budget-used-up",
        ),
        pytest.param(
            rules({"action": "RestartJobNotCounted", "maxRestarts": 5, "onFaults": ["NodeLost"]}),
            LOST,
            replace(progress(), infrastructure_restarts=10),
            "RestartJobNotCounted",
            f"{RULES}[0]",
            "",
            (0, 10, ((0, 1),)),
            id="a-rule-budget-replaces-infrastructure-retries",
        ),
    ],
)
def test_verdicts(
    run_policy: dict[str, Any],
    failure: Failure,
    before: Progress,
    action: str,
    rule: str,
    fail_reason: str,
    after: tuple[int, int, tuple[tuple[int, int], ...]],
) -> None:
    policy = job(runPolicy=run_policy).spec.run_policy
    verdict = judge(policy, failure, before)
    assert (verdict.action, verdict.rule, verdict.fail_reason) == (
        FailureAction(action),
        rule,
        fail_reason,
    )
    assert counts(verdict.progress) == after


def test_elastic_ignore_counts_nothing() -> None:
    policy = job(
        "Elastic",
        replicas=2,
        elastic={"minReplicas": 1, "maxReplicas": 3},
        runPolicy=rules({"action": "Ignore", "onPodConditions": ["DisruptionTarget"]}),
    ).spec.run_policy
    verdict = judge(policy, DISRUPTED, progress())
    assert verdict.action is FailureAction.IGNORE
    assert not verdict.fails
    assert counts(verdict.progress) == (0, 0, ())


def test_the_messages_name_the_rule_and_the_budget() -> None:
    policy = job(
        runPolicy=rules(
            {"name": "oom", "action": "FailJob", "onReasons": ["OOMKilled"]},
            infrastructureRetries=1,
        )
    ).spec.run_policy
    assert judge(policy, OOM, progress()).fail_message.startswith(
        f"{RULES}[0] (oom) matched: pod job-1 (replica 1) failed with exit code 137"
    )
    used_up = judge(policy, LOST, replace(progress(), infrastructure_restarts=1))
    assert "used up runPolicy.infrastructureRetries (1)" in used_up.fail_message


def test_a_rules_own_budget_is_told_in_the_restart() -> None:
    policy = job(
        runPolicy=rules(
            {"action": "RestartJobNotCounted", "maxRestarts": 3, "onReasons": ["OOMKilled"]}
        )
    ).spec.run_policy
    verdict = judge(policy, OOM, replace(progress(), rule_restarts=((0, 1),)))
    assert verdict.counted_as == (
        "restart 2 of the rule's maxRestarts 3, not counted against backoffLimit"
    )

"""The CEL rules of spec.runPolicy.failurePolicy (api/failure_policy.py), attached to
spec with the others of api/rules.py: a rule that matches nothing, or whose action
contradicts what it sets, is refused with a message naming the field."""

from __future__ import annotations

from multigpu_operator.api.failure_policy import FailureAction
from multigpu_operator.api.rule import Rule
from multigpu_operator.api.spec import Mode

_RULES = "self.runPolicy.failurePolicy.rules"
_FIELD = ".runPolicy.failurePolicy.rules"
_NO_POLICY = "!has(self.runPolicy.failurePolicy) || "
_RESTARTS = (FailureAction.RESTART_JOB, FailureAction.RESTART_JOB_NOT_COUNTED)

MSG_FAILURE_RULE_EMPTY = (
    "spec.runPolicy.failurePolicy.rules: every rule must match on something: set "
    "onExitCodes, onReasons, onPodConditions or onFaults"
)
MSG_FAILURE_RULE_MAX_RESTARTS = (
    "spec.runPolicy.failurePolicy.rules: maxRestarts is only allowed with action RestartJob "
    "or RestartJobNotCounted (FailJob and Ignore never restart the job)"
)
MSG_FAILURE_RULE_FAULTS = (
    "spec.runPolicy.failurePolicy.rules: onFaults cannot be combined with onExitCodes or "
    "onReasons (a fault is matched by what ended the pod, not by how it exited): put them "
    "in separate rules"
)
MSG_FAILURE_RULE_IGNORE = (
    "spec.runPolicy.failurePolicy.rules: action Ignore is only allowed when spec.mode is "
    "Elastic (the other modes restart every pod when one fails): use RestartJobNotCounted"
)
MSG_FAILURE_RULE_NAMES = "spec.runPolicy.failurePolicy.rules: rule names must be unique"

FAILURE_POLICY_RULES: tuple[Rule, ...] = (
    Rule(
        cel=_NO_POLICY + f"{_RULES}.all(r, has(r.onExitCodes) || has(r.onReasons) || "
        "has(r.onPodConditions) || has(r.onFaults))",
        message=MSG_FAILURE_RULE_EMPTY,
        field_path=_FIELD,
    ),
    Rule(
        cel=_NO_POLICY
        + f"{_RULES}.all(r, !has(r.maxRestarts) || "
        + " || ".join(f"r.action == '{a}'" for a in _RESTARTS)
        + ")",
        message=MSG_FAILURE_RULE_MAX_RESTARTS,
        field_path=_FIELD,
    ),
    Rule(
        cel=_NO_POLICY
        + f"{_RULES}.all(r, !has(r.onFaults) || (!has(r.onExitCodes) && !has(r.onReasons)))",
        message=MSG_FAILURE_RULE_FAULTS,
        field_path=_FIELD,
    ),
    Rule(
        cel=f"self.mode == '{Mode.ELASTIC}' || "
        + _NO_POLICY
        + f"{_RULES}.all(r, r.action != '{FailureAction.IGNORE}')",
        message=MSG_FAILURE_RULE_IGNORE,
        field_path=_FIELD,
    ),
    Rule(
        # No filter(): the API server's cost estimate charges a filtered list of these
        # objects at their largest size, past the CRD's budget. Names are optional, and
        # CEL may not read a missing one: conditionals, which evaluate one branch only
        # (cel-python, used offline, evaluates both sides of || and &&).
        cel=_NO_POLICY + f"{_RULES}.all(r, has(r.name) ? "
        f"{_RULES}.exists_one(x, has(x.name) ? x.name == r.name : false) : true)",
        message=MSG_FAILURE_RULE_NAMES,
        field_path=_FIELD,
    ),
)

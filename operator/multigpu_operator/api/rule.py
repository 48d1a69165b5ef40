"""One cross-field rule of the API, as CEL with its message (api/rules.py lists them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One rule as CEL: `self` is the object it is attached to, after defaulting (and
    `oldSelf` the stored one, for a transition rule). The API server evaluates it, and
    offline validation evaluates the very same string."""

    cel: str
    message: str
    field_path: str | None = None
    # CEL giving the message with the values it is about; `message` stays the fallback.
    message_expression: str | None = None

    @property
    def transition(self) -> bool:
        """Whether the rule compares with the stored object: the API server checks it on
        updates (kubectl patch, scale, apply) only."""
        return "oldSelf" in self.cel

    def validation(self) -> dict[str, str]:
        """The rule as an entry of x-kubernetes-validations."""
        out: dict[str, str] = {"rule": self.cel, "message": self.message}
        if self.message_expression:
            out["messageExpression"] = self.message_expression
        if self.field_path:
            out["fieldPath"] = self.field_path
        return out

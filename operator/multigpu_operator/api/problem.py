"""What is wrong with a job, by field: the one shape the offline validator
(api/validation.py) and the runtime merge (api/runtime_merge.py) report in. Its own
module so that the operator can name problems without importing the validator."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """What is wrong with a job: the field (`spec.elastic.minReplicas`) and why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

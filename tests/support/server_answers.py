"""What a real API server (kube-apiserver 1.36) answers to creating these specs, line for
line: the corners where it differs from JSON Schema. tests/unit/api/test_api_schema.py
checks that offline validation rejects them naming the same fields
(`names_the_fields`), and tests/integration/test_api_validation.py that the server
still answers so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from multigpu_operator.api.limits import MAX_REPLICAS
from multigpu_operator.api.rules import MSG_DATA_PARALLEL_REPLICAS, MSG_MODEL_PARALLEL_STAGES

RULES_NOT_CHECKED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)

TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "busybox:1.36"}]}}


def ddp(**fields: Any) -> dict[str, Any]:
    return {"mode": "DistributedDataParallel", "template": TEMPLATE, **fields}


# (id, spec, the server's lines)
SERVER_ANSWERS: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "int32-overflow",
        ddp(replicas=2**31),
        [
            '<nil>: Invalid value: "": Checked value must be of type integer with format int32 '
            "in spec.replicas",
            f"spec.replicas: Invalid value: {2**31}: spec.replicas in body should be less than "
            f"or equal to {MAX_REPLICAS}",
            f".spec.replicas: Invalid value: {2**31}: should be less than or equal to 2147483647",
        ],
    ),
    (
        "fraction",
        ddp(replicas=0.5),
        [
            'spec.replicas: Invalid value: "float64": spec.replicas in body must be of type '
            'int32: "float64"',
            '<nil>: Invalid value: "": Checked value must be of type integer with format int32 '
            "in spec.replicas",
            "spec.replicas: Invalid value: 0.5: spec.replicas in body should be greater than or "
            "equal to 1",
            ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: 0.5 is of the type "
            "float64, expected int64",
            RULES_NOT_CHECKED,
        ],
    ),
    (
        "integral-float-beyond-a-bound",
        ddp(masterPort=1e6),
        [
            "spec.masterPort: Invalid value: 1e+06: spec.masterPort in body should be less than "
            "or equal to 65535"
        ],
    ),
    (
        "int64-overflow",
        ddp(runPolicy={"activeDeadlineSeconds": 2**64}),
        [
            'spec.runPolicy.activeDeadlineSeconds: Invalid value: "float64": '
            'spec.runPolicy.activeDeadlineSeconds in body must be of type int64: "float64"',
            '<nil>: Invalid value: "": Checked value must be of type integer with format int64 '
            "in spec.runPolicy.activeDeadlineSeconds",
            "spec.runPolicy.activeDeadlineSeconds: Invalid value: 1.8446744073709552e+19: "
            "spec.runPolicy.activeDeadlineSeconds in body should be less than or equal to "
            "3.16224e+07",
            RULES_NOT_CHECKED,
        ],
    ),
    (
        "boolean-as-integer",
        ddp(gpusPerReplica=True),
        [
            'spec.gpusPerReplica: Invalid value: "": spec.gpusPerReplica in body must be of '
            'type int32: ""',
            RULES_NOT_CHECKED,
        ],
    ),
    (
        "set-duplicates",
        ddp(runPolicy={"retryableExitCodes": [3, 3, 1, 1.0]}),
        ["spec.runPolicy.retryableExitCodes[1]: Duplicate value: 3"],
    ),
    (
        "unknown-fields-only",
        ddp(replicas=-1, shmSize=[{"name": None}], foo=1),
        ['unknown field "spec.foo"', 'unknown field "spec.shmSize[0].name"'],
    ),
    (
        "integral-float-read-by-a-rule",
        {**ddp(mode="DataParallel"), "replicas": 2.0},
        [
            ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: 2 is of the type "
            "float64, expected int64",
            'spec: Invalid value: "object": invalid data, expected int, got float64 evaluating '
            f"rule: {MSG_DATA_PARALLEL_REPLICAS}",
        ],
    ),
    (
        "overflow-in-a-rule",
        ddp(mode="ModelParallel", replicas=2**62, gpusPerReplica=4, modelParallel={"stages": 1}),
        [
            '<nil>: Invalid value: "": Checked value must be of type integer with format int32 '
            "in spec.replicas",
            f"spec.replicas: Invalid value: {2**62}: spec.replicas in body should be less than "
            f"or equal to {MAX_REPLICAS}",
            f".spec.replicas: Invalid value: {2**62}: should be less than or equal to 2147483647",
            'spec: Invalid value: "object": integer overflow evaluating rule: '
            f"{MSG_MODEL_PARALLEL_STAGES}",
        ],
    ),
]


# Where the API server names the field in a line of its answer.
_FIELD = [
    re.compile(r'^unknown field "([^"]+)"'),
    re.compile(r"^<nil>: .* in (\S+)$"),
    re.compile(r"^\.?([^\s:]+): "),
]


def server_fields(lines: Iterable[str]) -> set[str]:
    """The fields the API server's lines name (`spec.replicas`)."""
    out = set()
    for line in lines:
        if line == RULES_NOT_CHECKED:
            continue
        match = next((m for m in (p.match(line) for p in _FIELD) if m), None)
        assert match is not None, line
        out.add(match.group(1))
    return out


def names_the_fields(offline: Iterable[str], server_lines: Iterable[str]) -> bool:
    """Whether offline validation names each field the server names: that field, the
    object it is in (a rule on it) or a field within it (a rule's fieldPath)."""
    ours = set(offline)
    return all(any(_related(field, mine) for mine in ours) for field in server_fields(server_lines))


def _related(a: str, b: str) -> bool:
    return a == b or _within(a, b) or _within(b, a)


def _within(field: str, parent: str) -> bool:
    return len(field) > len(parent) and field.startswith(parent) and field[len(parent)] in ".["

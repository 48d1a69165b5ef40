"""What a pod's labels say about it (api/pod_labels.py): one meaning of a missing label
for the operator, the client and `mgj`."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.pod_labels import (
    FIRST_ATTEMPT,
    UNKNOWN_REPLICA,
    attempt_of,
    replica_index,
    with_attempt,
)


def labelled(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "labels": labels}}


@pytest.mark.parametrize(
    ("pod", "attempt", "index"),
    [
        pytest.param(
            labelled(**{"multigpu.dev/attempt": "2", "multigpu.dev/replica-index": "3"}),
            2,
            3,
            id="labelled",
        ),
        pytest.param(labelled(), FIRST_ATTEMPT, UNKNOWN_REPLICA, id="unlabelled"),
        pytest.param({"metadata": {"name": "p"}}, 1, -1, id="no-labels-at-all"),
        pytest.param({}, 1, -1, id="no-metadata"),
        pytest.param(
            labelled(**{"multigpu.dev/attempt": "x", "multigpu.dev/replica-index": "-2"}),
            1,
            -1,
            id="not-numbers",
        ),
        pytest.param(labelled(**{"multigpu.dev/attempt": "0"}), 0, -1, id="attempt-0-as-said"),
    ],
)
def test_a_missing_label_has_one_meaning(pod: dict[str, Any], attempt: int, index: int) -> None:
    assert (attempt_of(pod), replica_index(pod)) == (attempt, index)


def test_with_attempt_labels_a_copy() -> None:
    pod = labelled(**{"multigpu.dev/replica-index": "0"})
    assert attempt_of(with_attempt(pod, 3)) == 3
    assert pod == labelled(**{"multigpu.dev/replica-index": "0"})
    assert attempt_of(with_attempt({"metadata": {"name": "p"}}, 2)) == 2

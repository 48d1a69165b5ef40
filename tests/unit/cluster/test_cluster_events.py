"""Every Event the operator posts is within the API's limits (cluster/events.py): the
API server refuses (422) a note over 1024 bytes, a reason or action over 128 characters,
a name over 253. tests/integration/test_operator_answers.py posts a long note to a real
API server."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from multigpu_operator.cluster.events import cut_to_bytes, event_body, event_name

NOW = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def job(name: str = "train") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": "uid-1"}}


@pytest.mark.parametrize(
    "message",
    [
        pytest.param("a" * 5000, id="ascii"),
        pytest.param("é" * 1000, id="two-byte-characters"),  # 2000 bytes in 1000 characters
        pytest.param("画像" * 400, id="three-byte-characters"),
        pytest.param("x" + "🚀" * 400, id="four-byte-characters-off-by-one"),
    ],
)
def test_a_long_note_is_cut_by_utf8_bytes_never_inside_a_character(message: str) -> None:
    note = event_body(job(), "Warning", "ErrImagePull", message, NOW, "op")["note"]
    assert len(note.encode()) <= 1024
    assert note.endswith("...")
    assert message.startswith(note[:-3])


def test_a_short_note_is_kept_whole() -> None:
    message = "pod train-0: 画像 pull failed"
    assert event_body(job(), "Warning", "ErrImagePull", message, NOW, "op")["note"] == message
    assert cut_to_bytes("a" * 1024, 1024) == "a" * 1024


def test_reason_action_and_instance_are_at_most_128_characters() -> None:
    body = event_body(job(), "Warning", "R" * 300, "m", NOW, "i" * 300)
    assert (len(body["reason"]), len(body["action"]), len(body["reportingInstance"])) == (
        128,
        128,
        128,
    )


@pytest.mark.parametrize(
    "name", ["train", "a" * 253, "a" * 239 + "-" + "b" * 13, "a" * 239 + "." + "b" * 13]
)
def test_the_event_name_is_a_dns_subdomain_of_at_most_253_characters(name: str) -> None:
    generated = event_name(name, "0123456789ab")
    assert len(generated) <= 253
    assert DNS_SUBDOMAIN.fullmatch(generated)
    assert generated.endswith(".0123456789ab")


def test_the_event_time_has_the_microseconds_a_microtime_needs() -> None:
    assert event_body(job(), "Normal", "R", "m", NOW, "op")["eventTime"] == (
        "2026-11-22T10:00:00.123456Z"
    )

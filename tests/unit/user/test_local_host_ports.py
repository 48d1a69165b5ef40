"""free_port picks listening ports where no outgoing connection can take them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from multigpu_operator.local import host


@pytest.mark.parametrize("count", [1, 2, 8])
def test_ports_lie_below_the_ephemeral_range_and_are_all_free(count: int) -> None:
    first_ephemeral = int(Path(host.EPHEMERAL_PORTS).read_text().split()[0])
    first = host.free_port(count)
    assert first >= host.LISTEN_PORTS_FROM
    assert first + count <= min(first_ephemeral, host.LISTEN_PORTS_BELOW)
    for port in range(first, first + count):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_taken_port_is_never_chosen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Two candidate ports, the first taken: only the second can come back, and no two
    # consecutive free ones exist.
    first = host.free_port(2)
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text(f"{first + 2}\t60999\n")
    monkeypatch.setattr(host, "EPHEMERAL_PORTS", str(ranges))
    monkeypatch.setattr(host, "LISTEN_PORTS_FROM", first)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        assert {host.free_port() for _ in range(20)} == {first + 1}
        with pytest.raises(RuntimeError, match="no 2 free consecutive ports"):
            host.free_port(2)

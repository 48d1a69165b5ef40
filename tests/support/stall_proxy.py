"""A TCP proxy in front of the API server that can stall: every connection stays open and
no byte goes through either way, as behind a load balancer or NAT that lost the
connections' state. TLS passes through untouched (the server's certificate names the
address, not the port), so a kubeconfig pointed at the proxy works as before.
"""

from __future__ import annotations

import select
import socket
import threading
from pathlib import Path

import yaml


class StallingProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.stalled = threading.Event()
        self._closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def kubeconfig(self, admin: Path, path: Path) -> Path:
        """A copy of the `admin` kubeconfig that talks to the API server through here."""
        config = yaml.safe_load(admin.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path.write_text(yaml.safe_dump(config))
        return path

    def close(self) -> None:
        self._closed.set()
        for sock in self._sockets:
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                downstream.close()  # the client sees a reset and tries again
                continue
            self._sockets += [downstream, upstream]
            for pair in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=pair, daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                # Nothing is read while stalled: the sender's buffers fill, and it waits.
                if self.stalled.is_set():
                    self._closed.wait(0.1)
                    continue
                ready, _, _ = select.select([source], [], [], 0.1)
                if not ready or self.stalled.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except (OSError, ValueError):  # ValueError: select() on a socket closed meanwhile
            pass
        finally:
            for sock in (source, sink):
                sock.close()

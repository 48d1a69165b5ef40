"""Run the operator: `python -m multigpu_operator` (settings from MGJ_* variables)."""

from __future__ import annotations

import socket
import sys
from typing import Any, cast

# kopf imports every Kubernetes client library it finds, only to recognise their model
# objects; the operator hands it plain dicts and makes its requests itself
# (cluster/rest.py). Neither client is in the image, but a development environment has
# both for the tests: kept out, they spare ~45 MiB.
sys.modules.setdefault("kubernetes", None)  # type: ignore[arg-type]
sys.modules.setdefault("kubernetes_asyncio", None)  # type: ignore[arg-type]

import asyncio.sslproto  # noqa: E402

import kopf  # noqa: E402

from multigpu_operator import handlers  # noqa: E402
from multigpu_operator.settings import Settings  # noqa: E402

# asyncio gives every TLS connection a 256 KiB read buffer up front: with the operator's
# 64 connections (MGJ_API_CONNECTIONS) and kopf's, 17 MiB while pods are being created
# (tracemalloc, docs/benchmarks.md), for JSON answers read as well 64 KiB at a time.
asyncio.sslproto.SSLProtocol.max_size = 64 * 1024

# The exit status after the leader election failed on a bug (never for an API server
# that is down or a Lease lost: the replica then stands by again): the kubelet restarts it.
ELECTION_FAILED = 1


def main() -> None:
    settings = Settings.from_env()
    kopf.configure(verbose=False)
    # Set when the leader election fails on a bug: kopf stops as on SIGTERM.
    stop = handlers.Stop()
    kopf.run(
        # Standalone: kopf's peering is not leader election; handlers.py runs our own on a
        # Lease, so that at most one replica reconciles.
        standalone=True,
        namespaces=[settings.namespace] if settings.namespace else (),
        clusterwide=settings.namespace is None,
        liveness_endpoint=f"http://0.0.0.0:{settings.liveness_port}/healthz",
        registry=handlers.registry,
        # kopf otherwise names itself after the OS user, and a container's numeric user
        # (65532, or any uid OpenShift assigns) has no passwd entry: getpass fails and the
        # operator never starts. (kopf types it as a NewType of str it does not export.)
        identity=cast(Any, socket.gethostname()),
        stop_flag=stop.flag,
        memo=kopf.Memo(stop=stop),
    )
    if stop.election_failed:
        sys.exit(ELECTION_FAILED)


if __name__ == "__main__":
    main()

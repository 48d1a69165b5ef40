"""Run the operator: `python -m multigpu_operator` (settings from MGJ_* variables)."""

from __future__ import annotations

import socket
from typing import Any, cast

import kopf

from multigpu_operator import handlers
from multigpu_operator.settings import Settings


def main() -> None:
    settings = Settings.from_env()
    kopf.configure(verbose=False)
    kopf.run(
        # Standalone: one replica (Recreate); kopf's peering is not leader election.
        standalone=True,
        namespaces=[settings.namespace] if settings.namespace else (),
        clusterwide=settings.namespace is None,
        liveness_endpoint=f"http://0.0.0.0:{settings.liveness_port}/healthz",
        registry=handlers.registry,
        # kopf otherwise names itself after the OS user, and a container's numeric user
        # (65532, or any uid OpenShift assigns) has no passwd entry: getpass fails and the
        # operator never starts. (kopf types it as a NewType of str it does not export.)
        identity=cast(Any, socket.gethostname()),
    )


if __name__ == "__main__":
    main()

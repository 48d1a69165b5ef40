"""The calls the operator, the client and `mgj` make to the API server, as a Protocol: a
handful of verbs over a Kind (cluster/kinds.py).

`cluster.api.Kube` is the real implementation; tests pass an in-memory API server
(tests/support/fake_cluster.py), the same one to the operator, the client and `mgj`.
Objects go in and out as plain JSON-ready dicts. Errors are those of cluster/errors.py,
never the client library's. Namespaces are ignored for cluster-scoped kinds; None lists
and watches across all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from multigpu_operator.cluster.kinds import Kind


class Cluster(Protocol):
    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        """One object; NotFound if absent (or the kind is not served)."""
        ...

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """The objects matching the label `selector` and the field selector `fields`
        (`regarding.name=x` for Events, as the kind supports), and the list's resourceVersion
        to watch from; NotFound when the kind is not served (Kueue not installed)."""
        ...

    async def read(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        subresource: str,
        params: Mapping[str, str] | None = None,
    ) -> str:
        """A subresource that is text, not an object: a pod's `log` (`params` its
        query). NotFound if the object is absent; a 400 (Invalid) when the server cannot
        give it yet, as for a container still waiting to start."""
        ...

    def stream(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        subresource: str,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        """The same, line by line (without line ends) as the server sends them, until it
        ends the answer: a followed pod log, until the container ends. No time limit."""
        ...

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        selector: str | None = None,
        timeout_seconds: int = 300,
        fields: str | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events ({type, object}, bookmarks included) of objects matching the label
        `selector` and the field selector `fields` after `resource_version`, until the
        server ends the watch; Gone when that version is too old. An object that stops
        matching comes as DELETED, one that starts matching as ADDED."""
        ...

    async def create(
        self,
        kind: Kind,
        namespace: str | None,
        body: Mapping[str, Any],
        dry_run: bool = False,
        read_back: bool = True,
    ) -> dict[str, Any] | None:
        """Create `body`; the object stored, or None if one of that name exists (a retry
        after a crash). With `dry_run`, only checked (validation, admission) and stored
        nowhere: an existing namesake is no error. Raises Invalid with the server's
        message when it refuses the object, a Forbidden when admission does. Without
        `read_back`, {} stands for the object stored: the answer is not decoded (a pod's
        is the whole pod, and decoding them was a large part of the operator's CPU)."""
        ...

    async def replace(self, kind: Kind, body: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the object (PUT) at the resourceVersion `body` names: Conflict if it
        changed since."""
        ...

    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        resource_version: str | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Merge-patch an object (or its `subresource`, "status") and return it. With
        `resource_version`, only if it has not changed since: Conflict otherwise.
        NotFound if absent; Invalid if the server refuses the result."""
        ...

    async def delete(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        uid: str | None = None,
        propagation: str | None = None,
    ) -> None:
        """Delete an object; with `uid`, only that very object (a namesake made since is
        left alone). `propagation` is the garbage collector's policy for its children.
        Already gone is not an error."""
        ...

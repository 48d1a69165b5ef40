"""What can go wrong in a call to the API server, in the controller's terms.

cluster/api.py converts every client exception into one of these, so the layers above
never import the client library and a test double raises the very same errors. The
API server's own message is kept: it is what users see on an invalid pod template.
"""

from __future__ import annotations


class ClusterError(Exception):
    """A request the API server refused or could not serve; `status` is the HTTP code
    (0 when no response came back)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Invalid(ClusterError):
    """400/422: the object was rejected (a field the server's validation refused)."""


class Forbidden(ClusterError):
    """403: RBAC does not allow the request."""


class NotFound(ClusterError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ClusterError):
    """409: the object changed since the version the request named, or a create found
    the name taken."""


class Gone(ClusterError):
    """410: a watch's resourceVersion is too old: list again."""


_BY_STATUS: dict[int, type[ClusterError]] = {
    400: Invalid,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def from_status(status: int | None, message: str) -> ClusterError:
    """The domain error for an HTTP status; others (429, 5xx) are plain ClusterErrors,
    retried by the controller like any failed pass."""
    code = status or 0
    return _BY_STATUS.get(code, ClusterError)(message, code)

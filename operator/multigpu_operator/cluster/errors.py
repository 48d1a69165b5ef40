"""What can go wrong in a call to the API server, in the controller's terms.

cluster/api.py converts every client exception into one of these, so the layers above
never import the client library and a test double raises the very same errors. The
API server's own message is kept: it is what users see on an invalid pod template.

A 403 has four causes that call for four different answers, so it is split here, the
one place that reads the server's wording: the namespace is being deleted (the job is
ending: stop quietly), a ResourceQuota is full or the pods' ServiceAccount not there yet
(wait: it may pass), RBAC denies the operator (the operator's fault: retry and alert),
or an admission check refused the object (the job's fault: fail it, naming the field).
"""

from __future__ import annotations

import re
from collections.abc import Iterable


class ClusterError(Exception):
    """A request the API server refused or could not serve; `status` is the HTTP code
    (0 when no response came back)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Invalid(ClusterError):
    """400/422: the object was rejected (a field the server's validation refused, or an
    unknown field under strict field validation)."""


class Forbidden(ClusterError):
    """403 from admission: a check refused the object (a PriorityClass or RuntimeClass
    that does not exist, Pod Security, a LimitRange, a webhook)."""


class AccessDenied(Forbidden):
    """403 from authorization: the operator's RBAC does not allow the request."""


class Waitable(Forbidden):
    """403 for what may pass without the job changing: the job waits, its Created
    condition False for `reason`, instead of failing."""

    reason = ""


class QuotaExceeded(Waitable):
    """403: a ResourceQuota of the namespace is used up; it may pass once other objects
    are gone or the quota is raised."""

    reason = "QuotaExceeded"


class ServiceAccountMissing(Waitable):
    """403: the pods' ServiceAccount is not there yet. The controller-manager creates a
    namespace's `default` one moments after the namespace, and a job's own is often
    applied beside the job (one `kubectl apply`, one GitOps sync); Kubernetes' Job
    controller retries such creates too."""

    reason = "ServiceAccountMissing"


class NamespaceTerminating(Forbidden):
    """403: the namespace is being deleted, so nothing new can be created in it; its
    objects (the job among them) are about to go."""


class NotFound(ClusterError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ClusterError):
    """409: the object changed since the version the request named, or a create found
    the name taken."""


class Gone(ClusterError):
    """410: a watch's resourceVersion is too old: list again."""


class Unreachable(ClusterError):
    """No answer: the connection was refused, reset or timed out (an API server
    restarting, a network cut). Transient, like a 429 or 5xx: callers retry."""


_BY_STATUS: dict[int, type[ClusterError]] = {
    400: Invalid,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}

# The Status cause the NamespaceLifecycle admission plugin attaches (v1.NamespaceTerminatingCause).
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
# The authorizer's wording: 'pods is forbidden: User "x" cannot create resource "pods" ...';
# and the OwnerReferencesPermissionEnforcement plugin's, also about the operator's RBAC.
_ACCESS_DENIED = re.compile(r'User "[^"]*" cannot [a-z]+ resource|cannot set blockOwnerDeletion')
_QUOTA_EXCEEDED = "exceeded quota"
# The ServiceAccount admission plugin's wording, whatever its lookup met (not found, or
# the API server's own read failing).
_SERVICE_ACCOUNT_LOOKUP = "error looking up service account"


def transient(err: ClusterError) -> bool:
    """Whether the API server may answer otherwise later without anyone changing anything:
    no answer, 429 (too many requests) or 5xx (unavailable, timeout, etcd down)."""
    return err.status == 0 or err.status == 429 or err.status >= 500


def from_status(status: int | None, message: str, causes: Iterable[str] = ()) -> ClusterError:
    """The domain error for an HTTP status, the server's message and the reasons of its
    Status causes; others (429, 5xx) are plain ClusterErrors, retried by the controller
    like any failed pass."""
    code = status or 0
    if code == 403:
        return _forbidden(message, set(causes))(message, code)
    return _BY_STATUS.get(code, ClusterError)(message, code)


def _forbidden(message: str, causes: set[str]) -> type[Forbidden]:
    if NAMESPACE_TERMINATING_CAUSE in causes:
        return NamespaceTerminating
    if _ACCESS_DENIED.search(message):
        return AccessDenied
    if _QUOTA_EXCEEDED in message:
        return QuotaExceeded
    if _SERVICE_ACCOUNT_LOOKUP in message:
        return ServiceAccountMissing
    return Forbidden

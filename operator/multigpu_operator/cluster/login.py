"""Who the requests to the API server are made as: a login gives the credentials (kopf's
login: the service account in a pod, else the kubeconfig), read again when the server
answers 401 (a rotated token). cluster/rest.py uses them; the client makes its login
from the kubeconfig."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Protocol


class Credentials(Protocol):
    """What a login gives (kopf.ConnectionInfo is one): where the API server is and how
    to prove who we are."""

    @property
    def server(self) -> str: ...

    @property
    def proxy_url(self) -> str | None: ...

    def as_ssl_context(self) -> ssl.SSLContext: ...

    def as_http_headers(self) -> dict[str, str]: ...


Login = Callable[[], Credentials | None]

"""Reading a training process's progress gauges from its own metrics endpoint.

Not the API server: an HTTP GET of the pod's IP on MGJ_TRAINER_METRICS_PORT + LOCAL_RANK,
asking only for the gauges policy/training.py names (prometheus_client serves just the
`name[]` it is asked for), so a read is a few hundred bytes whatever else the process
exports. A process that does not answer within READ_TIMEOUT reads as None: a frozen or
dead process, or one that serves no metrics.
"""

from __future__ import annotations

import math

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from multigpu_operator.policy.training import GAUGES

READ_TIMEOUT = aiohttp.ClientTimeout(total=3, sock_connect=2)
_QUERY = [("name[]", gauge) for gauge in GAUGES]
Gauges = dict[str, float]


class ProcessMetrics:
    """One HTTP session for every read; pods are reached directly, never via a proxy."""

    def __init__(self, connections: int = 32) -> None:
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def read(self, ip: str, port: int) -> Gauges | None:
        """The gauges process (ip, port) serves, or None if it did not answer."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections, force_close=True),
                timeout=READ_TIMEOUT,
                trust_env=False,
            )
        host = f"[{ip}]" if ":" in ip else ip
        try:
            async with self._session.get(f"http://{host}:{port}/metrics", params=_QUERY) as got:
                if got.status != 200:
                    return None
                return parse(await got.text())
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def parse(text: str) -> Gauges:
    """Gauge name -> its first sample's value, for the gauges we read (finite ones)."""
    values: Gauges = {}
    for family in text_string_to_metric_families(text):
        if family.name in GAUGES and family.samples:
            value = float(family.samples[0].value)
            if math.isfinite(value):
                values[family.name] = value
    return values

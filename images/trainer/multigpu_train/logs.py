"""Log lines that say which rank and process wrote them."""

from __future__ import annotations

import logging
import os
import sys


def setup(rank: int) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("MGJ_LOG_LEVEL", "INFO").upper(),
        format=f"%(asctime)s rank={rank} pid={os.getpid()} %(name)s %(levelname)s %(message)s",
        force=True,
    )

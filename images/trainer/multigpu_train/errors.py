"""The one exception for a set-up that cannot train: a clear message instead of a hang,
and an exit status that says "do not retry"."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

# EX_CONFIG of sysexits.h. The operator fails the job at once on it (no restart: the
# same image, flags and data fail the same way every time), unless the job lists it
# in runPolicy.retryableExitCodes.
SETUP_ERROR_EXIT_CODE = 78
# What the kubelet copies into the container's terminated state (terminationMessagePath,
# at most 4096 bytes): the operator reads the message there, even under torchrun, which
# exits 1 whatever its worker exited with.
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_PREFIX = "SetupError: "


class SetupError(RuntimeError):
    """The job's environment, flags or data cannot work; the message says what to change.

    Raised before any collective call where possible, so every rank fails fast with
    the same message instead of waiting on peers that never come.
    """


@contextlib.contextmanager
def exit_on_setup_error() -> Iterator[None]:
    """A SetupError ends the process with SETUP_ERROR_EXIT_CODE and its message as the
    last line of output and in the termination log; no traceback, which says nothing
    the message does not."""
    try:
        yield
    except SetupError as err:
        logging.shutdown()
        print(f"multigpu_train.errors.SetupError: {err}", file=sys.stderr, flush=True)
        _write_termination_log(f"{TERMINATION_PREFIX}{err}")
        sys.stdout.flush()
        # Without interpreter finalization, as distributed.exit_after_success (a torch
        # C++ thread was seen to abort it).
        os._exit(SETUP_ERROR_EXIT_CODE)


def _write_termination_log(message: str) -> None:
    path = Path(os.environ.get("MGJ_TERMINATION_LOG", TERMINATION_LOG))
    # Kubernetes creates the file; elsewhere (a laptop, a test) there is none to fill.
    if not path.is_file():
        return
    with contextlib.suppress(OSError):
        path.write_bytes(message.encode()[:4000])

"""The one exception for a set-up that cannot train: a clear message instead of a hang."""

from __future__ import annotations


class SetupError(RuntimeError):
    """The job's environment, flags or data cannot work; the message says what to change.

    Raised before any collective call where possible, so every rank fails fast with
    the same message instead of waiting on peers that never come.
    """

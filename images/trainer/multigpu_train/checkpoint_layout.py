"""Where sharded checkpoints live on the volume, and how one becomes the latest.

    <checkpoint dir>/
        latest                   the name of the newest complete checkpoint, one line
        step-000000120/          one checkpoint (torch.distributed.checkpoint, DCP)
            .metadata            DCP's index of every shard, written last by rank 0
            __0_0.distcp ...     one file per rank: only that rank's shards
            progress.json        epoch, position, seed, step, world size, time

A save writes into a fresh step directory; once every rank's shards and the metadata
are on the volume, rank 0 writes ``latest`` to a temporary file and renames it into
place (``os.replace``, atomic on one file system). A save cut short (a killed rank, a
full disk) leaves a step directory that ``latest`` does not name: it is never loaded,
and the next save removes it, with any checkpoint older than the latest one.

Only rank 0 calls the functions that write; every rank may read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

LATEST = "latest"
PROGRESS = "progress.json"
PREFIX = "step-"


def latest(directory: Path) -> str | None:
    """The name of the newest complete checkpoint in ``directory``, or None."""
    try:
        name = (directory / LATEST).read_text().strip()
    except FileNotFoundError:
        return None
    return name or None


def fresh_name(directory: Path, step: int) -> str:
    """A step directory's name for a save at ``step`` that is not the latest checkpoint
    (a job resumed at a step and saving again at the same one gets a suffix)."""
    name = f"{PREFIX}{step:09d}"
    current = latest(directory)
    suffix = 1
    candidate = name
    while candidate == current:
        candidate = f"{name}.{suffix}"
        suffix += 1
    return candidate


def leftovers(directory: Path) -> list[Path]:
    """What is not the latest checkpoint: step directories of interrupted saves and of
    older checkpoints, and temporary files of an interrupted publish."""
    if not directory.is_dir():
        return []
    keep = latest(directory)
    found = []
    for entry in directory.iterdir():
        older = entry.name.startswith(PREFIX) and entry.name != keep
        unpublished = entry.name.startswith(f".{LATEST}.") and entry.name.endswith(".tmp")
        if older or unpublished:
            found.append(entry)
    return sorted(found)


def remove_leftovers(directory: Path) -> list[Path]:
    """Remove ``leftovers(directory)``; what was removed."""
    removed = leftovers(directory)
    for entry in removed:
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
    return removed


def write_progress(checkpoint: Path, progress: dict[str, Any]) -> None:
    _write_durably(checkpoint / PROGRESS, json.dumps(progress, sort_keys=True) + "\n")


def read_progress(checkpoint: Path) -> dict[str, Any]:
    progress: dict[str, Any] = json.loads((checkpoint / PROGRESS).read_text())
    return progress


def publish(directory: Path, name: str) -> None:
    """Make ``name`` the latest checkpoint: ``latest`` replaced in one rename."""
    fsync_dir(directory / name)
    tmp = directory / f".{LATEST}.{os.getpid()}.tmp"
    try:
        _write_durably(tmp, name + "\n")
        os.replace(tmp, directory / LATEST)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(directory)


def _write_durably(path: Path, text: str) -> None:
    with path.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(directory: Path) -> None:
    """Make the names in ``directory`` durable; some file systems cannot open one."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

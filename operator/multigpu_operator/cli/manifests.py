"""The documents `mgj render` and `mgj run` read: a YAML or JSON file of one or more
documents (- reads stdin), or a directory standing for its .yaml, .yml and .json files in
name order, as `kubectl apply -f DIR` reads it. Runtimes (MultiGPURuntime,
ClusterMultiGPURuntime) are kept for the jobs that name them; documents of other kinds
are skipped, with a note saying so."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from multigpu_operator.api.runtime import RuntimeKind
from multigpu_operator.api.spec import KIND

# What `kubectl apply -f DIR` reads from a directory.
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Manifests:
    """The documents read from a file, a directory or stdin."""

    jobs: list[Any]  # the MultiGPUJobs
    skipped: list[str]  # one note per other document
    runtimes: list[Any] = field(default_factory=list)  # runtimes, for the jobs naming them


def read_manifests(path: Path) -> Manifests:
    jobs: list[Any] = []
    skipped: list[str] = []
    runtimes: list[Any] = []
    for where, doc in _documents(path):
        if is_job(doc):
            jobs.append(doc)
        elif is_runtime(doc):
            runtimes.append(doc)
        elif doc is not None:  # an empty document (a stray ---) is no document
            skipped.append(f"skipped {where}: {_describe(doc)}, not a {KIND}")
    return Manifests(jobs, skipped, runtimes)


def read_and_note(path: Path) -> Manifests:
    """The manifests of `path`, a note on stderr for each document skipped."""
    manifests = read_manifests(path)
    for note in manifests.skipped:
        print(f"note: {note}", file=sys.stderr)
    return manifests


class InvalidYaml(ValueError):
    def __init__(self, source: str, error: yaml.YAMLError) -> None:
        super().__init__(f"{source} is not valid YAML: {error}")


def is_job(doc: Any) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") == KIND


def is_runtime(doc: Any) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") in tuple(RuntimeKind)


def _documents(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, document) for every document of `path`."""
    if str(path) == "-":
        yield from _numbered("stdin", sys.stdin.read())
    elif path.is_dir():
        for file in sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES):
            yield from _numbered(str(file), file.read_text())
    else:
        yield from _numbered(str(path), path.read_text())


def _numbered(source: str, text: str) -> Iterator[tuple[str, Any]]:
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        raise InvalidYaml(source, err) from err
    for number, doc in enumerate(documents, start=1):
        yield f"{source} document {number}", doc


def _describe(doc: Any) -> str:
    if not isinstance(doc, Mapping):
        return f"a {type(doc).__name__}"
    name = (doc.get("metadata") or {}).get("name")
    kind = doc.get("kind") or "an object without a kind"
    return f"{kind} {name!r}" if name else str(kind)

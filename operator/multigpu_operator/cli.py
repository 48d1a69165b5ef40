"""The `mgj` command line.

mgj render FILE [-n NAMESPACE]   print the objects the operator would create
mgj crd                          print the MultiGPUJob CRD
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from multigpu_operator import __version__
from multigpu_operator.api.crd import crd
from multigpu_operator.api.spec import KIND, Job
from multigpu_operator.api.validation import validate_object
from multigpu_operator.plan import PlanError, plan_job

# The API server assigns a job's UID on creation; offline it is shown as this.
PLACEHOLDER_UID = "uid-assigned-at-creation"


def render(documents: Iterator[Any], namespace: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Children of every MultiGPUJob in `documents`, through the operator's own planner."""
    objects: list[dict[str, Any]] = []
    errors: list[str] = []
    for doc in documents:
        if not isinstance(doc, Mapping) or doc.get("kind") != KIND:
            continue
        name = doc.get("metadata", {}).get("name", "?")
        problems = validate_object(doc)
        if problems:
            errors += [f"{name}: {p}" for p in problems]
            continue
        meta = {"namespace": namespace, "uid": PLACEHOLDER_UID, **doc["metadata"]}
        try:
            desired = plan_job(Job.from_object({**doc, "metadata": meta}))
        except PlanError as err:
            errors.append(f"{name}: {err}")
            continue
        objects += [desired.service, *desired.pods]
    return objects, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mgj", description="multigpu-operator tools")
    parser.add_argument("--version", action="version", version=f"mgj {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    render_cmd = sub.add_parser("render", help="print the pods and Service a job would get")
    render_cmd.add_argument("file", type=Path, help="a YAML file with MultiGPUJob(s); - for stdin")
    render_cmd.add_argument("-n", "--namespace", default="default")
    sub.add_parser("crd", help="print the MultiGPUJob CustomResourceDefinition")
    args = parser.parse_args(argv)

    if args.command == "crd":
        yaml.safe_dump(crd(), sys.stdout, sort_keys=False)
        return 0
    text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
    objects, errors = render(yaml.safe_load_all(text), args.namespace)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if objects:
        yaml.safe_dump_all(objects, sys.stdout, sort_keys=False)
    if not objects and not errors:
        print(f"error: no {KIND} in {args.file}", file=sys.stderr)
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

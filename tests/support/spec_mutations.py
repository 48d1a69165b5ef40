"""Seeded mutations of the example jobs: the specs a typo, a template engine or a fuzzer
sends to the API server.

Each mutation takes one example (examples/*.yaml) and makes one to three edits at
random places of its spec: a field the example sets, one the schema declares that the
example leaves out, or one inside the pod template. An edit is one of the `EDITS`: a
null, a removed field, a value of another JSON type, an int32/int64 bound, a huge
number, an empty string, an unknown field, a null nested in a list or map, a duplicate
in a set, or a valid but unusual value that exercises the cross-field rules. Now and
then the job's name is one the name rules refuse. The same seed always gives the same
mutations, so a failure names one that can be replayed (`mutations(n)[i]`).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from multigpu_operator.api.openapi import Schema
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import KIND

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEED = 13

Path_ = tuple[str | int, ...]
_DELETE = object()  # an edit's value that removes the field

# Values of every JSON type, for type changes and nested nulls.
OTHER_TYPES: tuple[Any, ...] = (
    *("", "x", "3", 0, 1, -1, 1.5, 2.0, True, False),
    *([], {}, [1], {"a": 1}),
)
# Integers at and around the bounds Kubernetes' formats and our schema care about.
INTEGERS: tuple[int, ...] = (
    0,
    -1,
    1,
    2,
    7,
    2**31 - 1,
    2**31,
    -(2**31),
    -(2**31) - 1,
    2**53,
    2**62,
    2**63 - 1,
    2**63,
    -(2**63),
    2**64,
    10**12,
    10**30,
)
HUGE: tuple[Any, ...] = (1e300, -1e300, 1e21, 1e6, 123456789.0, 0.5, -0.0, 100000.0, 65535.5)
STRINGS: tuple[str, ...] = ("", " ", "Foo", "elastic", "2Gi", "0", "é", "a\nb", "<&>", "x" * 300)
# Names the API server's and our own name rules refuse (and one they take).
NAMES: tuple[str, ...] = ("Job", "1job", "my.job", "a" * 57, "a" * 254, "-x", "x_y", "", "ok-2")
UNKNOWN_KEYS: tuple[str, ...] = ("foo", "replicaz", "gpusPerreplica", "minreplicas", "x-extra")


@dataclass(frozen=True)
class Mutation:
    """One mutated example: its whole manifest and what was changed."""

    index: int
    example: str
    edits: tuple[str, ...]
    manifest: dict[str, Any]

    def __str__(self) -> str:
        return f"mutation {self.index} of {self.example}: {'; '.join(self.edits)}"


def mutations(count: int, seed: int = SEED) -> list[Mutation]:
    """`count` mutations, the same ones for the same seed."""
    rng = random.Random(seed)
    examples = _examples()
    out = []
    for index in range(count):
        name, manifest = examples[rng.randrange(len(examples))]
        manifest = copy.deepcopy(manifest)
        edits = tuple(_edit(rng, manifest["spec"]) for _ in range(rng.choice((1, 1, 2, 3))))
        if rng.random() < 0.03:
            manifest["metadata"]["name"] = rng.choice(NAMES)
            edits += (f"name {manifest['metadata']['name'][:60]!r}",)
        out.append(Mutation(index, name, edits, manifest))
    return out


def _examples() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == KIND:
                doc["metadata"].pop("namespace", None)
                found.append((path.name, doc))
    return found


# --- where ------------------------------------------------------------------------------


def _places(spec: dict[str, Any]) -> list[tuple[Path_, Schema | None]]:
    """Every field and list item of `spec`, and every field the schema declares but the
    spec leaves out, each with its schema (None inside the pod template's free part)."""
    places: list[tuple[Path_, Schema | None]] = []

    def walk(value: Any, schema: Schema | None, path: Path_) -> None:
        places.append((path, schema))
        declared = (schema or {}).get("properties", {})
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(sub, _child(schema, key), (*path, key))
            for key, sub in declared.items():
                if key not in value:
                    places.append(((*path, key), sub))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, (schema or {}).get("items"), (*path, i))
        elif value is None:
            for key, sub in declared.items():
                places.append(((*path, key), sub))

    walk(spec, spec_schema(), ())
    return [p for p in places if p[0]]


def _child(schema: Schema | None, key: str) -> Schema | None:
    if schema is None:
        return None
    if key in schema.get("properties", {}):
        sub: Schema = schema["properties"][key]
        return sub
    values = schema.get("additionalProperties")
    return values if isinstance(values, dict) else None


# --- what -------------------------------------------------------------------------------


def _null(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    return None


def _remove(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    return _DELETE


def _other_type(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    return copy.deepcopy(rng.choice(OTHER_TYPES))


def _integer(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    bounds = [
        b + d
        for key in ("minimum", "maximum")
        if schema and key in schema
        for b in (int(schema[key]),)
        for d in (-1, 0, 1)
    ]
    return rng.choice([*INTEGERS, *bounds, *bounds])


def _huge(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    return rng.choice(HUGE)


def _string(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    choices = [*STRINGS, *[str(v) for v in (schema or {}).get("enum", [])]]
    if isinstance(current, str):
        choices += [current.lower(), current.upper(), f" {current}"]
    return rng.choice(choices)


def _valid_value(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    """Something the schema takes, to reach the cross-field rules."""
    schema = schema or {}
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if schema.get("type") == "integer":
        low = int(schema.get("minimum", 0))
        return rng.choice([low, low + 1, low + 2, 4, 8, 16, int(schema.get("maximum", 64))])
    if schema.get("type") == "boolean":
        return rng.choice((True, False))
    if schema.get("type") == "object" and "properties" in schema:
        return _valid_object(rng, schema)
    return copy.deepcopy(current) if current is not None else rng.choice(("x", 1))


def _valid_object(rng: random.Random, schema: Schema) -> dict[str, Any]:
    out = {}
    for key, sub in schema["properties"].items():
        if key in schema.get("required", []) or rng.random() < 0.3:
            out[key] = _valid_value(rng, None, sub)
    return out


def _nested_null(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    if isinstance(current, list):
        return [*copy.deepcopy(current), None] if rng.random() < 0.5 else [None]
    if isinstance(current, dict):
        return {**copy.deepcopy(current), rng.choice(("a", "cpu", "name")): None}
    return rng.choice(([None], {"a": None}, [{"name": None}], {"a": {"b": None}}))


def _duplicate(rng: random.Random, current: Any, schema: Schema | None) -> Any:
    item: Any = rng.choice((1, 3, 3, 300, 1.0, "a", {}, None))
    return [item, item] if rng.random() < 0.7 else [item, 1, item]


Edit = Callable[[random.Random, Any, Schema | None], Any]
EDITS: dict[str, Edit] = {
    "null": _null,
    "remove": _remove,
    "other type": _other_type,
    "integer bound": _integer,
    "huge number": _huge,
    "string": _string,
    "valid value": _valid_value,
    "nested null": _nested_null,
    "duplicates": _duplicate,
}


def _edit(rng: random.Random, spec: dict[str, Any]) -> str:
    """One edit of `spec` in place, described."""
    if rng.random() < 0.12:
        return _add_unknown_field(rng, spec)
    if rng.random() < 0.15:
        return _cross_field(rng, spec)
    kind = rng.choice(list(EDITS))
    places = _places(spec)
    if kind == "duplicates":  # where the schema has sets
        sets = [p for p in places if (p[1] or {}).get("x-kubernetes-list-type") == "set"]
        places = sets or places
    path, schema = rng.choice(places)
    value = EDITS[kind](rng, _get(spec, path), schema)
    _set(spec, path, value)
    shown = "removed" if value is _DELETE else repr(value)[:60]
    return f"{kind} at {_dotted(path)}: {shown}"


# Valid values of the fields the cross-field rules read.
CROSS_FIELD: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("mode", ("DataParallel", "DistributedDataParallel", "ModelParallel", "Elastic")),
    ("launcher", ("Script", "Torchrun")),
    ("replicas", (1, 2, 3, 5)),
    ("gpusPerReplica", (0, 1, 2, 8)),
    ("elastic", ({"minReplicas": 1, "maxReplicas": 4}, {"minReplicas": 3, "maxReplicas": 2})),
    ("modelParallel", ({}, {"stages": 2}, {"stages": 4}, {"microBatches": 8})),
)


def _cross_field(rng: random.Random, spec: dict[str, Any]) -> str:
    """A valid value of a field that cross-field rules read, likely breaking one."""
    key, values = rng.choice(CROSS_FIELD)
    spec[key] = copy.deepcopy(rng.choice(values))
    return f"cross-field at spec.{key}: {spec[key]!r}"


def _add_unknown_field(rng: random.Random, spec: dict[str, Any]) -> str:
    objects = [p for p, s in _places(spec) if isinstance(_get(spec, p), dict)]
    path = rng.choice([(), *objects])
    key = rng.choice(UNKNOWN_KEYS)
    parent = _get(spec, path) if path else spec
    parent[key] = rng.choice((1, None, "x", {}))
    return f"unknown field at {_dotted((*path, key))}"


def _get(spec: Any, path: Path_) -> Any:
    node = spec
    for part in path:
        if isinstance(node, dict) and isinstance(part, str):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node


def _set(spec: dict[str, Any], path: Path_, value: Any) -> None:
    """Set (or with _DELETE remove) the value at `path`, creating missing objects."""
    node: Any = spec
    for part in path[:-1]:
        if isinstance(node, dict):
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return
    last = path[-1]
    if isinstance(node, dict) and isinstance(last, str):
        if value is _DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value


def _dotted(path: Path_) -> str:
    return "spec" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def summary(found: list[Mutation]) -> Iterator[str]:
    """How many edits of each kind, for a test's log."""
    kinds: dict[str, int] = {}
    for mutation in found:
        for edit in mutation.edits:
            kind = edit.split(" at ")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    yield from (f"{k}: {n}" for k, n in sorted(kinds.items()))

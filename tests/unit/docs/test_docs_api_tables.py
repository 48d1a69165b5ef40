"""The docs' copies of the API's bounds and defaults agree with the CRD generated from api/.

README's limits table and docs/lifecycle.md's defaults are what users read first; the
models in api/ are what the API server enforces. A changed bound or default fails here
until the docs say the same (`make docs` rewrites the generated blocks)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from multigpu_operator.api.crd import crd
from multigpu_operator.api.limits import MAX_WORLD_SIZE
from multigpu_operator.api.schema import spec_schema
from support.doc_tables import BLOCKS, LIFECYCLE_POLICIES, ROOT, committed

# Bounded fields the limits table leaves out on purpose: their bound is no choice of ours.
NOT_LIMITS = {
    "masterPort": "a TCP port",
    "runPolicy.retryableExitCodes[]": "an exit code",
}


def _prop(path: str) -> Mapping[str, Any]:
    """The schema of `path` under spec, e.g. elastic.minReplicas."""
    schema: Mapping[str, Any] = spec_schema()
    for part in path.split("."):
        schema = schema["properties"][part]
    return schema


def _bounded(schema: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, int]]:
    """(path, maximum) of every bounded field under spec (the pod template excluded)."""
    for name, prop in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        if "maximum" in prop:
            yield path, prop["maximum"]
        if "maximum" in prop.get("items", {}):
            yield f"{path}[]", prop["items"]["maximum"]
        yield from _bounded(prop, f"{path}.")


def _section(page: str, heading: str) -> str:
    text = (ROOT / page).read_text()
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start : end if end >= 0 else None]


def _table(section: str) -> list[list[str]]:
    """The rows of the first table in `section`, header and rule left out."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _readme_limits() -> dict[str, int]:
    limits: dict[str, int] = {}
    for fields, most, _why in _table(_section("README.md", "### Limits")):
        number = re.match(r"\d+", most)
        assert number, f"README limits: {most!r} does not start with a number"
        for field in re.findall(r"`([\w.]+)`", fields):
            assert field not in limits, f"README limits: {field} twice"
            limits[field] = int(number.group())
    return limits


def test_readme_limits_are_the_crd_maximums() -> None:
    documented = _readme_limits()
    declared = {path: most for path, most in _bounded(spec_schema()) if path not in NOT_LIMITS}
    assert documented == declared


def test_readme_states_the_largest_world() -> None:
    section = _section("README.md", "### Limits")
    found = re.search(r"at most ([\d,]+) processes", section)
    assert found
    assert int(found.group(1).replace(",", "")) == MAX_WORLD_SIZE


@pytest.mark.parametrize(("page", "name"), list(BLOCKS))
def test_generated_blocks_are_up_to_date(page: str, name: str) -> None:
    assert committed(page, name) == BLOCKS[page, name](), f"{page}: run `make docs`"


def _lifecycle_sections() -> Iterator[tuple[str | None, str]]:
    """(the spec policy a section of docs/lifecycle.md is about, its text)."""
    text = (ROOT / "docs/lifecycle.md").read_text()
    for section in re.split(r"\n(?=## )", text):
        policy = re.match(r"## [^\n]*`spec\.(\w+)`", section)
        yield (policy.group(1) if policy else None), section


def _resolve(field: str, policy: str | None) -> Mapping[str, Any]:
    """A field as the docs name it: `gang.timeoutSeconds`, or bare inside its policy's
    section, or bare and found in one lifecycle policy only."""
    if "." in field:
        return _prop(field)
    spec = spec_schema()["properties"]
    owners = (
        [policy] if policy else [p for p in LIFECYCLE_POLICIES if field in spec[p]["properties"]]
    )
    assert len(owners) == 1, f"docs/lifecycle.md: which policy has `{field}`? {owners}"
    return _prop(f"{owners[0]}.{field}")


def _shown(value: Any) -> str:
    return "[]" if value is None else str(value)


def test_lifecycle_default_tables_match_the_crd() -> None:
    checked = 0
    for policy, section in _lifecycle_sections():
        header = next((line for line in section.splitlines() if line.startswith("| field")), "")
        if "| default |" not in header or "<!-- generated" in section:
            continue
        for field, default, *_ in _table(section[section.index(header) :]):
            prop = _resolve(field.strip("`"), policy)
            assert default.strip("`") == _shown(prop.get("default")), field
            checked += 1
    assert checked >= 3  # runPolicy's table


def test_lifecycle_defaults_in_the_text_match_the_crd() -> None:
    checked = 0
    for policy, section in _lifecycle_sections():
        # "`gang.timeoutSeconds` (default 300)" and "(`onTimeout: Fail`, default)"
        mentions = re.findall(r"`([\w.]+)` \(default ([^)]+)\)", section)
        mentions += re.findall(r"\(`(\w+): (\w+)`, default\)", section)
        for field, default in mentions:
            prop = _resolve(field, policy)
            assert default == _shown(prop.get("default")), f"docs/lifecycle.md: {field}"
            checked += 1
    assert checked >= 6


def test_spec_defaults_named_in_any_doc_match_the_crd() -> None:
    # "`spec.masterPort` (29500)", "`spec.shmSize` (default 2Gi)", "`spec.gpuResource`
    # (default `nvidia.com/gpu`; ...)": every mention of a spec field's default.
    mention = re.compile(r"`spec\.([\w.]+)` \((?:default `?([\w./-]+)`?|(\d+))[;,)]")
    checked = 0
    for page in ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]:
        for field, default, number in mention.findall((ROOT / page).read_text()):
            shown = _shown(_prop(field).get("default"))
            assert (default or number) == shown, f"{page}: spec.{field}"
            checked += 1
    assert checked >= 6


def test_lifecycle_shows_the_printer_columns() -> None:
    # The sample `kubectl get mgj` output: NAME, then the CRD's additionalPrinterColumns.
    (version,) = crd()["spec"]["versions"]
    columns = [c["name"].upper() for c in version["additionalPrinterColumns"]]
    text = (ROOT / "docs/lifecycle.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("NAME "))
    assert header.split() == ["NAME", *columns]

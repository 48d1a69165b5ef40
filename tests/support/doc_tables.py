"""Tables of the docs that are generated from the API's models, never kept by hand.

`make docs` (``python -m support.doc_tables``) rewrites each generated block of the docs;
tests/unit/docs/test_docs_api_tables.py fails while a committed block differs from what the
models give, so a changed default or bound cannot leave the docs behind.

A generated block sits between two markers in its page:

    <!-- generated: NAME (make docs) -->
    ...
    <!-- end generated: NAME -->
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from multigpu_operator.api.schema import spec_schema

ROOT = Path(__file__).resolve().parents[2]

# The lifecycle policies of spec, as docs/lifecycle.md presents them.
LIFECYCLE_POLICIES = ("runPolicy", "gang", "startPolicy", "elastic")
DAY = 24 * 3600


def _seconds(n: int) -> str:
    if n >= DAY and n % DAY == 0:
        days = n // DAY
        return "a week" if days == 7 else f"{days} days"
    return ""


def _allowed(name: str, prop: Mapping[str, Any]) -> str:
    if "enum" in prop:
        return ", ".join(f"`{v}`" for v in prop["enum"])
    if prop.get("type") == "array":
        return "a set of " + _allowed(name, prop["items"])
    if prop.get("type") == "integer":
        low, high = prop.get("minimum"), prop.get("maximum")
        text = f"{low} .. {high}"
        unit = _seconds(high) if "Seconds" in name and high is not None else ""
        return f"{text} ({unit})" if unit else text
    return str(prop.get("type", ""))


def _default(name: str, prop: Mapping[str, Any], required: set[str]) -> str:
    if name in required:
        return "required"
    if "default" in prop:
        return f"`{prop['default']}`"
    if prop.get("type") == "array":
        return "`[]`"
    return "unset"


def lifecycle_settings() -> str:
    """docs/lifecycle.md: every lifecycle setting, its default and what it accepts, as
    the CRD generated from api/ declares them."""
    spec = spec_schema()["properties"]
    lines = ["| field | default | allowed |", "|---|---|---|"]
    for policy in LIFECYCLE_POLICIES:
        schema = spec[policy]
        required = set(schema.get("required", ()))
        for name, prop in schema["properties"].items():
            default = _default(name, prop, required)
            lines.append(f"| `{policy}.{name}` | {default} | {_allowed(name, prop)} |")
    return "\n".join(lines) + "\n"


# (page, block name) -> what the block holds.
BLOCKS: dict[tuple[str, str], Callable[[], str]] = {
    ("docs/lifecycle.md", "lifecycle settings"): lifecycle_settings,
}


def _block(name: str) -> re.Pattern[str]:
    begin = re.escape(f"<!-- generated: {name} (make docs) -->")
    end = re.escape(f"<!-- end generated: {name} -->")
    return re.compile(f"({begin}\n)(.*?)({end})", re.DOTALL)


def committed(page: str, name: str) -> str:
    """The block as the page holds it now."""
    found = _block(name).search((ROOT / page).read_text())
    if found is None:
        raise LookupError(f"{page} has no generated block {name!r}")
    return found.group(2)


def regenerate(page: str, name: str, body: str) -> bool:
    """Writes `body` into the page's block; whether that changed the page."""
    path = ROOT / page
    text = path.read_text()
    new = _block(name).sub(lambda m: m.group(1) + body + m.group(3), text, count=1)
    path.write_text(new)
    return new != text


def main() -> int:
    for (page, name), generate in BLOCKS.items():
        committed(page, name)  # the markers must exist
        if regenerate(page, name, generate()):
            print(f"{page}: rewrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Figures of the operator package's shape, for a design review: lines per folder, files in
policy/, status reads by string key in the pure pass, import circles and imports from a
lower layer to a higher one (the layers of pyproject.toml's layers contract).

    .venv/bin/python tests/bench/code_figures.py [CHECKOUT]

CHECKOUT (default: this one) may be a worktree of another commit: its package is read.
"""

from __future__ import annotations

import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]


def layers(checkout: Path) -> list[list[str]]:
    """The layers contract's layers, highest first (this checkout's if it has one)."""
    pyproject = checkout / "pyproject.toml"
    if not (pyproject.exists() and "layers" in pyproject.read_text()):
        pyproject = REPO / "pyproject.toml"
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    found = next(c for c in contracts if c["type"] == "layers")
    return [[name.strip() for name in layer.split("|")] for layer in found["layers"]]


def layer_of(module: str, order: list[list[str]]) -> int | None:
    if module.startswith("multigpu_operator.cli"):  # cli.py and cli_*.py of older commits
        return 0
    for index, names in enumerate(order):
        if any(module == n or module.startswith(n + ".") for n in names):
            return index
    return None


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other, directly or not (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    checkout = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else REPO
    package = checkout / "operator/multigpu_operator"
    # That checkout's package, imported before anything imports this one's.
    sys.path[:0] = [str(checkout / "operator"), str(REPO / "tests")]
    from support.status_reads import string_reads

    lines: dict[str, int] = defaultdict(int)
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).parts
        lines[parts[0] if len(parts) > 1 else "(root)"] += len(path.read_text().splitlines())
    print(
        f"lines: {sum(lines.values())} ({', '.join(f'{k} {v}' for k, v in sorted(lines.items()))})"
    )
    policy = sorted((package / "policy").rglob("*.py"))
    print(f"files in policy/: {len(policy)}")
    pure = [*policy, package / "reconcile.py"]
    reads = [line for path in pure for line in string_reads(path.read_text())]
    print(f"status reads by string key in policy/ and reconcile.py: {len(reads)}")
    graph = grimp.build_graph("multigpu_operator", cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    print(f"import circles: {circles(edges)}")
    order = layers(checkout)
    upward = [
        f"{a} -> {b}"
        for a, targets in sorted(edges.items())
        for b in sorted(targets)
        if (la := layer_of(a, order)) is not None
        and (lb := layer_of(b, order)) is not None
        and lb < la
    ]
    print(f"imports from a lower layer to a higher one: {upward}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The import graph of the project's top-level packages and of its modules, their cycles, and a picture.

    .venv/bin/python scripts/import_graph.py [--out results/import_graph.png]

Why a script (and tests/test_layering.py beside it): the layering is only real if a change that breaks it
fails; the test reads the same graph this script draws. Every `import` and `from ... import` counts, at
module level, inside functions (late imports are still dependencies) and under TYPE_CHECKING (the type
checker follows them). The module graph (`module_graph`) counts the same imports between single modules
(a cycle between two modules of one package is as real as one between packages, and late imports would
hide one). Standard library only for the graphs; matplotlib draws the package picture.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Folders that are not part of the product's layering (the tests may import anything).
NOT_LAYERED = frozenset({"tests", "scripts", "notebooks"})
#: Edges the layering forbids even without a cycle: (importer, imported, why).
FORBIDDEN_EDGES: tuple[tuple[str, str, str], ...] = (
    ("nodes", "evals", "graph nodes must not depend on the benchmarks"),
    ("evals", "service", "benchmarks run the graphs through graphs.runner, not through the CLI/API layer"),
    ("persistence", "retrieval", "retrieval builds on the stores; shared types and analysis live in core"),
    ("persistence", "nodes", "stores are below the graph nodes"),
    ("graphs", "service", "the graphs are below the CLI/API layer"),
)
#: core is the lowest layer: it imports no other package of the project.
LOWEST = "core"

Graph = dict[str, dict[str, list[str]]]


def packages(root: Path = REPO_ROOT) -> list[str]:
    """The project's top-level packages (folders with an __init__.py), tests and tools left out."""
    return sorted(
        path.name
        for path in root.iterdir()
        if (path / "__init__.py").is_file() and path.name not in NOT_LAYERED
    )


def _imported_modules(tree: ast.AST) -> Iterable[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, node.lineno


def import_graph(root: Path = REPO_ROOT) -> Graph:
    """{importer package: {imported package: ["file:line", ...]}} over every .py file of each package."""
    names = packages(root)
    graph: Graph = {name: defaultdict(list) for name in names}
    for name in names:
        for path in sorted((root / name).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for module, line in _imported_modules(tree):
                target = module.split(".")[0]
                if target in graph and target != name:
                    graph[name][target].append(f"{path.relative_to(root)}:{line}")
    return {name: dict(edges) for name, edges in graph.items()}


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    """The dotted name Python imports a file under (a package's __init__.py is the package itself)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _module_targets(tree: ast.AST, known: set[str]) -> Iterable[tuple[str, int]]:
    """The project modules one file's imports load: `from a.b import c` loads a.b and, when c is a module
    of its own, a.b.c too; `import a.b.c` loads the longest known prefix."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _longest_known(alias.name, node.lineno, known)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from _longest_known(node.module, node.lineno, known)
            for alias in node.names:
                if f"{node.module}.{alias.name}" in known:
                    yield f"{node.module}.{alias.name}", node.lineno


def _longest_known(name: str, line: int, known: set[str]) -> Iterable[tuple[str, int]]:
    """The longest prefix of the dotted `name` that is a project module (none for a library)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            yield candidate, line
            return


def module_graph(root: Path = REPO_ROOT) -> Graph:
    """{importer module: {imported module: ["file:line", ...]}} over every .py file of the layered packages.

    The same imports count as in `import_graph` (late ones and TYPE_CHECKING ones too); `from a.b import c`
    with c a module is an edge to a.b.c and to a.b (whose __init__ runs first)."""
    files = {
        module_name(path, root): path
        for name in packages(root)
        for path in sorted((root / name).rglob("*.py"))
    }
    known = set(files)
    graph: Graph = {name: defaultdict(list) for name in sorted(files)}
    for name, path in sorted(files.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target, line in _module_targets(tree, known):
            if target != name:
                graph[name][target].append(f"{path.relative_to(root)}:{line}")
    return {name: dict(edges) for name, edges in graph.items()}


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one node (each one is a cycle), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def forbidden_edges(graph: Graph) -> list[str]:
    """One line per forbidden edge present, naming the files and lines that make it."""
    problems = [
        f"{source} -> {target} ({why}): {', '.join(graph[source][target])}"
        for source, target, why in FORBIDDEN_EDGES
        if target in graph.get(source, {})
    ]
    if graph.get(LOWEST):
        problems.append(f"{LOWEST} must import no project package: {graph[LOWEST]}")
    return problems


def layers(graph: Graph) -> dict[str, int]:
    """Layer of each package: 0 for one that imports nothing of the project, else 1 + its highest import.
    (Members of a cycle share the layer the first of them reached.)"""
    layer: dict[str, int] = {}

    def depth(node: str, seen: frozenset[str]) -> int:
        if node in layer:
            return layer[node]
        targets = [target for target in graph.get(node, {}) if target not in seen]
        value = 1 + max((depth(target, seen | {node}) for target in targets), default=-1)
        layer[node] = value
        return value

    for node in sorted(graph):
        depth(node, frozenset())
    return layer


def draw(graph: Graph, out: Path) -> Path:
    """A layered picture: packages in rows by layer (lowest at the bottom), one arrow per import edge,
    arrows in a cycle drawn red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layer = layers(graph)
    in_cycle = {(a, b) for component in cycles(graph) for a in component for b in component}
    rows: dict[int, list[str]] = defaultdict(list)
    for name in sorted(graph):
        rows[layer[name]].append(name)
    position = {
        name: ((index + 1) / (len(members) + 1), level)
        for level, members in rows.items()
        for index, name in enumerate(members)
    }
    figure, axes = plt.subplots(figsize=(10, 1.4 * (max(rows) + 1) + 1))
    for source, targets in sorted(graph.items()):
        for target, sites in sorted(targets.items()):
            cyclic = (source, target) in in_cycle
            axes.annotate(
                "",
                xy=position[target],
                xytext=position[source],
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": "tab:red" if cyclic else "0.55",
                    "lw": 0.6 + min(len(sites), 30) / 15,
                    "shrinkA": 16,
                    "shrinkB": 16,
                    "connectionstyle": "arc3,rad=0.08",
                },
            )
    for name, (x, y) in position.items():
        axes.text(
            x,
            y,
            name,
            ha="center",
            va="center",
            fontsize=10,
            bbox={"boxstyle": "round,pad=0.35", "facecolor": "white", "edgecolor": "0.2"},
        )
    axes.set_xlim(0, 1)
    axes.set_ylim(-0.6, max(rows) + 0.6)
    axes.axis("off")
    edges = sum(len(targets) for targets in graph.values())
    axes.set_title(
        f"Package imports ({len(graph)} packages, {edges} edges; arrow = imports; width = import sites; "
        f"red = cycle: {len(cycles(graph))})",
        fontsize=9,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(out, dpi=110, metadata={"Date": None} if out.suffix == ".svg" else {})
    plt.close(figure)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "import_graph.png")
    args = parser.parse_args()
    graph = import_graph()
    for source, targets in sorted(graph.items()):
        print(f"{source:12} -> {', '.join(sorted(targets)) or '-'}")
    for component in cycles(graph):
        print("cycle:", " <-> ".join(component))
    for problem in forbidden_edges(graph):
        print("forbidden:", problem)
    for component in cycles(module_graph()):
        print("module cycle:", " <-> ".join(component))
    print(f"picture: {draw(graph, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

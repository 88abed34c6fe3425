"""No product module over MAX_MODULE_LINES lines (one concern per module; a module that long
holds several), and no product function over MAX_FUNCTION_LINES. Product modules are those of the layered
packages (scripts/import_graph.packages) outside the benchmarks; tests, scripts and notebooks are not product
code."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.import_graph import graph_tools

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Lines a product module may have ("about 400", with room for a docstring's growth).
MAX_MODULE_LINES = 450
#: Lines a product function or method may have, from its `def` line to its last (decorators not counted):
#: one function does one job, and a reader holds one job in mind at once.
MAX_FUNCTION_LINES = 60
#: Packages that are not product code although they are layered (benchmark runners and their CLI).
NOT_PRODUCT = frozenset({"benchmarks"})
#: Modules still over the limit, each with why; an entry that is no longer over it fails the test, so the
#: list only shrinks.
OVER_THE_LIMIT: dict[str, str] = {}


def module_lengths(root: Path = REPO_ROOT) -> dict[str, int]:
    """Lines of every product module, by path relative to `root`."""
    return {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for package in graph_tools.packages(root)
        if package not in NOT_PRODUCT
        for path in sorted((root / package).rglob("*.py"))
    }


def long_functions(root: Path = REPO_ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`path:function (N lines)` for every function or method of a product module over `limit` lines."""
    found = []
    for path in module_lengths(root):
        tree = ast.parse((root / path).read_text(encoding="utf-8"), filename=path)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append(f"{path}:{node.name} ({lines} lines)")
    return sorted(found)


def too_long(lengths: dict[str, int], limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """The modules over `limit` lines."""
    return {path: lines for path, lines in lengths.items() if lines > limit}


def test_no_product_module_is_over_the_limit() -> None:
    lengths = module_lengths()
    assert {"nodes/generate.py", "persistence/catalog.py", "retrieval/ingest.py"} <= set(lengths)
    over = too_long(lengths)
    assert {path: lines for path, lines in over.items() if path not in OVER_THE_LIMIT} == {}, (
        f"split these by concern (at most {MAX_MODULE_LINES} lines each)"
    )
    stale = sorted(set(OVER_THE_LIMIT) - set(over))
    assert stale == [], f"no longer over the limit (or gone): remove them from OVER_THE_LIMIT: {stale}"


def test_the_check_finds_a_long_module_and_leaves_tests_out(tmp_path: Path) -> None:
    limit = MAX_MODULE_LINES
    for folder, lines in {"core": limit + 1, "benchmarks": 2 * limit, "tests": 2 * limit}.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "long.py").write_text("x = 1\n" * lines)
    (tmp_path / "core" / "short.py").write_text("x = 1\n" * limit)
    lengths = module_lengths(tmp_path)
    assert lengths == {"core/__init__.py": 0, "core/long.py": limit + 1, "core/short.py": limit}
    assert too_long(lengths) == {"core/long.py": limit + 1}


def test_no_product_function_is_over_the_limit() -> None:
    over = long_functions()
    assert over == [], (
        f"split these into functions of one job each (at most {MAX_FUNCTION_LINES} lines): {over}"
    )


def test_the_function_check_finds_a_long_method_and_leaves_tests_out(tmp_path: Path) -> None:
    limit = MAX_FUNCTION_LINES
    for folder in ("core", "tests"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "long.py").write_text("def long():\n" + "    x = 1\n" * limit)
    short = "@staticmethod\ndef short():\n" + "    x = 1\n" * (limit - 1)
    method = "class Holder:\n    async def method(self):\n" + "        x = 1\n" * limit
    (tmp_path / "core" / "kinds.py").write_text(short + method)
    assert long_functions(tmp_path) == [
        f"core/kinds.py:method ({limit + 1} lines)",
        f"core/long.py:long ({limit + 1} lines)",
    ]

"""No product module over MAX_MODULE_LINES lines (one concern per module; a module that long
holds several). Product modules are those of the layered packages (scripts/import_graph.packages) outside
the benchmarks; tests, scripts and notebooks are not product code."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.import_graph import graph_tools

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Lines a product module may have ("about 400", with room for a docstring's growth).
MAX_MODULE_LINES = 450
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

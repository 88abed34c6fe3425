"""The package layering: no import cycle between top-level packages, none of the forbidden
edges, and a graph check that can fail (a planted cycle is found)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.import_graph import graph_tools

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_the_packages_import_each_other_without_a_cycle() -> None:
    graph = graph_tools.import_graph()
    assert {"core", "nodes", "persistence", "retrieval", "evals", "service", "graphs"} <= set(graph)
    found = graph_tools.cycles(graph)
    detail = {
        f"{a} -> {b}": graph[a][b][:5]
        for component in found
        for a in component
        for b in component
        if b in graph[a]
    }
    assert found == [], f"import cycles {found}; edges: {detail}"


def test_no_forbidden_edge() -> None:
    assert graph_tools.forbidden_edges(graph_tools.import_graph()) == []


#: The benchmark campaigns: a checkout-only package that is not installed, so the product's
#: packages may never import it (it imports them).
CHECKOUT_ONLY = "benchmarks"


def product_imports_of_checkout_only(graph: dict[str, dict[str, list[str]]]) -> dict[str, list[str]]:
    """{product package: the files and lines that import the checkout-only package}."""
    return {
        package: edges[CHECKOUT_ONLY]
        for package, edges in graph.items()
        if package != CHECKOUT_ONLY and CHECKOUT_ONLY in edges
    }


def test_no_product_package_imports_the_benchmarks() -> None:
    graph = graph_tools.import_graph()
    assert CHECKOUT_ONLY in graph and "evals" in graph[CHECKOUT_ONLY]  # the campaigns build on the product
    assert product_imports_of_checkout_only(graph) == {}


def test_the_benchmarks_are_not_installed() -> None:
    """The wheel's packages (pyproject's find rule) hold evals but not the campaigns or their fixtures."""
    import tomllib

    from setuptools import find_packages

    rule = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    find = rule["tool"]["setuptools"]["packages"]["find"]
    installed = find_packages(str(REPO_ROOT), include=find["include"], exclude=find.get("exclude", ()))
    assert "evals" in installed and "service.cli" in installed
    assert not [name for name in installed if name.split(".")[0] == CHECKOUT_ONLY]


def test_a_product_import_of_the_benchmarks_is_found(tmp_path: Path) -> None:
    for name, body in {"evals": "def f():\n    from benchmarks.models import g\n", "benchmarks": ""}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "a.py").write_text(body)
    assert product_imports_of_checkout_only(graph_tools.import_graph(tmp_path)) == {"evals": ["evals/a.py:2"]}


def test_the_check_finds_a_planted_cycle_and_a_late_import(tmp_path: Path) -> None:
    for name, body in {
        "low": "def f():\n    from high.x import y  # a late import is still an edge\n",
        "high": "import low.a\n",
        "alone": "import json\n",
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "a.py").write_text(body)
    graph = graph_tools.import_graph(tmp_path)
    assert graph == {"alone": {}, "high": {"low": ["high/a.py:1"]}, "low": {"high": ["low/a.py:2"]}}
    assert graph_tools.cycles(graph) == [["high", "low"]]


def test_a_forbidden_edge_is_reported_with_its_file(tmp_path: Path) -> None:
    for name, body in {"nodes": "from evals.metrics import f\n", "evals": ""}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "a.py").write_text(body)
    problems = graph_tools.forbidden_edges(graph_tools.import_graph(tmp_path))
    assert len(problems) == 1 and problems[0].startswith("nodes -> evals") and "nodes/a.py:1" in problems[0]


def test_the_catalog_reads_database_urls_without_importing_the_database() -> None:
    """persistence.database imports the catalog, so the catalog reaching back for its URL helpers (late
    imports, once) was a hidden cycle; they live in persistence.urls now, which imports no store."""
    import ast

    for module, forbidden in (("catalog", "persistence.database"), ("urls", "persistence.")):
        tree = ast.parse((REPO_ROOT / "persistence" / f"{module}.py").read_text(encoding="utf-8"))
        imported = [name for name, _line in graph_tools._imported_modules(tree)]
        assert not [name for name in imported if name.startswith(forbidden)], (module, imported)


def test_the_modules_import_each_other_without_a_cycle() -> None:
    """No cycle between modules either: a late import is a dependency too, so a cycle through one counts."""
    graph = graph_tools.module_graph()
    assert {"nodes.generate", "persistence.catalog", "retrieval.ingest", "service.api.routes_seed"} <= set(
        graph
    )
    found = graph_tools.cycles(graph)
    detail = {
        f"{a} -> {b}": graph[a][b][:5]
        for component in found
        for a in component
        for b in component
        if b in graph[a]
    }
    assert found == [], f"module import cycles {found}; edges: {detail}"


def test_the_module_check_finds_a_planted_cycle_through_late_and_type_checking_imports(
    tmp_path: Path,
) -> None:
    package = tmp_path / "app"
    package.mkdir()
    for name, body in {
        "__init__": "",
        "a": "from app.b import f\n",
        "b": (
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from app.c import g\n\n\n"
            "def f():\n    from app import a  # a late import is still an edge\n"
        ),
        "c": "import app.a.missing_attribute\nimport json\n",
        "alone": "from app import b as _b\n",
    }.items():
        (package / f"{name}.py").write_text(body)
    graph = graph_tools.module_graph(tmp_path)
    assert graph == {
        "app": {},
        "app.a": {"app.b": ["app/a.py:1"]},
        "app.alone": {"app": ["app/alone.py:1"], "app.b": ["app/alone.py:1"]},
        "app.b": {"app.c": ["app/b.py:4"], "app": ["app/b.py:8"], "app.a": ["app/b.py:8"]},
        "app.c": {"app.a": ["app/c.py:1"]},
    }
    assert graph_tools.cycles(graph) == [["app.a", "app.b", "app.c"]]

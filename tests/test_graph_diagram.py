"""docs/design.md shows the graphs as the code builds them: its marked Mermaid blocks are redrawn here from
the compiled graphs and must be identical, so an edge or node added in graphs/ without regenerating the page
fails (the message names the command that refreshes it, graphs.diagram.REFRESH_COMMAND)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graphs import diagram
from tests.conftest import REPO_ROOT

#: Graphs the design page must show (the agentic graph and the baseline it is measured against).
REQUIRED = {"rag", "baseline"}
#: Model runtimes that drawing the graphs must not import: compiling a graph loads no model.
MODEL_RUNTIMES = ("torch", "sentence_transformers", "transformers", "xllamacpp", "onnxruntime", "llama_cpp")


def test_the_design_page_shows_the_graphs_the_code_builds() -> None:
    text = diagram.DESIGN_DOC.read_text(encoding="utf-8")
    names = diagram.documented_graphs(text)
    assert REQUIRED <= set(names), (
        f"docs/design.md lacks a <!-- graph:NAME --> block for {REQUIRED - set(names)}"
    )
    stale = diagram.stale_graphs(text, diagram.current_diagrams(names))
    assert stale == [], (
        f"docs/design.md's diagrams of {', '.join(stale)} differ from the compiled graphs; "
        f"run `{diagram.REFRESH_COMMAND}` and commit docs/design.md"
    )


def test_the_rag_diagram_has_every_node_and_edge_of_the_compiled_graph() -> None:
    """What LangGraph reports of the compiled graph, not what the generator wrote, is in the page's block."""
    text = diagram.DESIGN_DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- graph:rag -->\n(.*?)<!-- /graph:rag -->", text, re.DOTALL)
    assert block is not None
    drawn = diagram.GRAPH_BUILDERS["rag"]().get_graph()
    assert {"compress_evidence", "grade_answer", "not_found"} <= set(drawn.nodes)
    for node in drawn.nodes:
        assert re.search(rf"^\t{node}\(", block.group(1), re.MULTILINE), f"node {node} missing"
    for edge in drawn.edges:
        arrow = "-.->" if edge.conditional else "-->"
        assert f"\t{edge.source} {arrow} {edge.target};" in block.group(1), f"edge {edge} missing"


def test_a_changed_graph_is_reported_stale_and_refreshed() -> None:
    diagrams = {"rag": "graph TD;\n\ta --> b;\n", "baseline": "graph TD;\n\tc --> d;\n"}
    current = "# Title\n\n" + diagram.diagram_block("rag", diagrams["rag"]) + "\n\ntext\n"
    current += diagram.diagram_block("baseline", diagrams["baseline"]) + "\n"
    assert diagram.stale_graphs(current, diagrams) == []
    old = current.replace("a --> b", "a --> c")
    assert diagram.stale_graphs(old, diagrams) == ["rag"]
    empty = "intro\n<!-- graph:baseline -->\n<!-- /graph:baseline -->\nend\n"
    assert diagram.stale_graphs(empty, diagrams) == ["baseline"]
    assert diagram.refreshed(old, diagrams) == current
    assert diagram.refreshed(empty, diagrams) == (
        "intro\n<!-- graph:baseline -->\n```mermaid\ngraph TD;\n\tc --> d;\n```\n"
        "<!-- /graph:baseline -->\nend\n"
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("<!-- graph:rag -->\n```mermaid\n```\n", "not closed"),
        ("<!-- graph:nope -->\n<!-- /graph:nope -->\n", "unknown graph in a marker: nope"),
    ],
)
def test_a_broken_marker_is_an_error_naming_it(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        diagram.documented_graphs(text)


def test_the_check_command_passes_and_loads_no_model() -> None:
    """The command the stale message names, run as a user runs it, in a process of its own."""
    probe = (
        "import json, sys; from graphs.diagram import main; rc = main(['--check']); "
        f"print(json.dumps(sorted(m for m in {MODEL_RUNTIMES!r} if m in sys.modules))); sys.exit(rc)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_check_command_fails_on_a_stale_page(tmp_path: Path) -> None:
    assert diagram.main(["--check", "--doc", str(tmp_path / "absent.md")]) == diagram.EXIT_BAD_INPUT
    page = tmp_path / "design.md"
    page.write_text(
        "<!-- graph:direct -->\n```mermaid\ngraph TD;\n```\n<!-- /graph:direct -->\n", encoding="utf-8"
    )
    assert diagram.main(["--check", "--doc", str(page)]) == diagram.EXIT_STALE
    assert diagram.main(["--doc", str(page)]) == 0
    assert "\tgenerate --> cite;" in page.read_text(encoding="utf-8")
    assert diagram.main(["--check", "--doc", str(page)]) == 0

"""The checkpoint modules import one another without a cycle (issue 22 §4): persistence/threads.py and
persistence/postgres_checkpoints.py used to import each other (hidden behind a TYPE_CHECKING import), and the
split keeps each module at most ~400 lines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The modules of the conversation store, and the most lines one of them may have.
CHECKPOINT_MODULES = (
    "persistence.thread_access",
    "persistence.saver_mixins",
    "persistence.threads",
    "persistence.postgres_checkpoints",
    "persistence.checkpointer",
)
MAX_MODULE_LINES = 400


def _graph_tools() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", REPO_ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


def test_the_checkpoint_modules_form_no_import_cycle() -> None:
    tools = _graph_tools()
    graph = tools.module_graph()
    assert set(CHECKPOINT_MODULES) <= set(graph)
    found = [cycle for cycle in tools.cycles(graph) if set(cycle) & set(CHECKPOINT_MODULES)]
    assert found == []
    assert "persistence.threads" not in graph["persistence.postgres_checkpoints"]
    assert "persistence.threads" not in graph["persistence.saver_mixins"]


def test_a_planted_cycle_between_threads_and_postgres_checkpoints_is_found() -> None:
    tools = _graph_tools()
    graph = tools.module_graph()
    graph["persistence.postgres_checkpoints"]["persistence.threads"] = ["planted:1"]
    assert any(
        {"persistence.threads", "persistence.postgres_checkpoints"} <= set(c) for c in tools.cycles(graph)
    )


def test_no_checkpoint_module_is_over_the_line_limit() -> None:
    for module in CHECKPOINT_MODULES:
        path = REPO_ROOT / (module.replace(".", "/") + ".py")
        assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_MODULE_LINES, module

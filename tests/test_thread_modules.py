"""The checkpoint modules import one another without a cycle: persistence/threads.py and
persistence/postgres_checkpoints.py used to import each other (hidden behind a TYPE_CHECKING import), and the
split keeps each module at most ~400 lines."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.import_graph import graph_tools

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


def test_the_checkpoint_modules_form_no_import_cycle() -> None:
    graph = graph_tools.module_graph()
    assert set(CHECKPOINT_MODULES) <= set(graph)
    found = [cycle for cycle in graph_tools.cycles(graph) if set(cycle) & set(CHECKPOINT_MODULES)]
    assert found == []
    assert "persistence.threads" not in graph["persistence.postgres_checkpoints"]
    assert "persistence.threads" not in graph["persistence.saver_mixins"]


def test_a_planted_cycle_between_threads_and_postgres_checkpoints_is_found() -> None:
    graph = graph_tools.module_graph()
    graph["persistence.postgres_checkpoints"]["persistence.threads"] = ["planted:1"]
    assert any(
        {"persistence.threads", "persistence.postgres_checkpoints"} <= set(c)
        for c in graph_tools.cycles(graph)
    )


def test_no_checkpoint_module_is_over_the_line_limit() -> None:
    for module in CHECKPOINT_MODULES:
        path = REPO_ROOT / (module.replace(".", "/") + ".py")
        assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_MODULE_LINES, module

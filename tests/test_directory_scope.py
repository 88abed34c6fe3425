"""Directory scope: a search restricted to the documents under a path prefix, matched on whole
path components (`/docs/a` never matches `/docs/ab`), never past the tenant; through the searcher, the mock
retriever, the graph's context, `rag search --dir` / `rag ask --dir` and the API's `directory` field (a real
server).

Why every file of the corpus mentions the query's words: the scope, not the ranking, must be what leaves a
document out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from config.settings import load_settings
from graphs.runner import compiled_graph
from nodes.resources import Resources
from nodes.start_turn import InvalidQuestionError
from persistence.semantic_cache_backends import CacheScope
from retrieval import search as search_module
from retrieval.directory_scope import DirectoryError, cli_directory, is_under, normalize_directory
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.mock_retriever import MockSearcher
from retrieval.search import QueryError, Searcher
from service.api.app import create_app
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

CORPUS = {
    "docs/a/guide.md": "# Guide\n\nThe warranty of the kettle lasts two years.",
    "docs/a/sub/deep.md": "# Deep\n\nThe warranty of the toaster lasts one year.",
    "docs/ab/other.md": "# Other\n\nThe warranty of the blender lasts five years.",
    "elsewhere/note.md": "# Note\n\nThe warranty of the fridge lasts ten years.",
}
QUESTION = "How long does the warranty last?"


def names(sources: list[str], root: Path) -> list[str]:
    """The corpus files `sources` name: a search hit's absolute path, or the public form an answer or a
    response shows (the file name, never a server path; the corpus's file names are distinct)."""
    by_name = {Path(name).name: name for name in CORPUS}
    return sorted(
        str(Path(source).relative_to(root)) if Path(source).is_absolute() else by_name[source]
        for source in sources
    )


@pytest.fixture
def corpus(tmp_path: Path, kb: KnowledgeBase) -> Path:
    """The corpus indexed for tenant `acme`, and docs/ab plus elsewhere for tenant `globex` too."""
    files = write_corpus(tmp_path / "corpus", CORPUS)
    ingest_paths(kb, list(files.values()), tenant="acme")
    ingest_paths(kb, [files["docs/ab/other.md"], files["elsewhere/note.md"]], tenant="globex")
    return (tmp_path / "corpus").resolve()


def searched(kb: KnowledgeBase, directory: str, tenant: str = "acme", **kwargs: Any) -> list[str]:
    hits = Searcher(kb).search(QUESTION, k=10, tenant=tenant, directory=directory, **kwargs).hits
    return [str(hit.metadata["source"]) for hit in hits]


# --- the path rules --------------------------------------------------------------------------------------


def test_a_directory_is_normalised_absolute_and_never_climbs() -> None:
    assert normalize_directory("") == ""
    assert normalize_directory("/srv//docs/./a/") == "/srv/docs/a"
    assert normalize_directory("/") == "/"
    for bad, reason in (
        ("docs/a", "not an absolute path"),
        ("/srv/docs/../secrets", "'..'"),
        ("/srv/\ndocs", "control character"),
        ("/" + "x" * 5000, "too long"),
    ):
        with pytest.raises(DirectoryError, match=reason):
            normalize_directory(bad)


def test_matching_is_by_whole_path_components() -> None:
    assert is_under("/docs/a/guide.md", "/docs/a") and is_under("/docs/a", "/docs/a")
    assert not is_under("/docs/ab/other.md", "/docs/a") and not is_under("/docs", "/docs/a")
    assert is_under("/docs/x.md", "/") and not is_under("text:abc", "/") and is_under("text:abc", "")


def test_cli_directories_are_resolved_like_ingested_paths(tmp_path: Path) -> None:
    assert cli_directory("docs/a") == str((tmp_path / "docs" / "a").resolve())  # tests run in tmp_path
    assert cli_directory("") == ""


# --- the store's searcher --------------------------------------------------------------------------------


def test_search_keeps_the_documents_under_the_directory_only(kb: KnowledgeBase, corpus: Path) -> None:
    found = searched(kb, str(corpus / "docs" / "a"))
    assert names(found, corpus) == ["docs/a/guide.md", "docs/a/sub/deep.md"]  # not docs/ab/other.md
    assert names(searched(kb, str(corpus / "docs")), corpus) == [
        "docs/a/guide.md",
        "docs/a/sub/deep.md",
        "docs/ab/other.md",
    ]
    assert names(searched(kb, str(corpus / "docs/a/guide.md")), corpus) == ["docs/a/guide.md"]
    assert searched(kb, str(corpus / "docs" / "nowhere")) == []
    assert searched(kb, str(corpus / "docs" / "a_")) == []  # `_` is no LIKE wildcard here
    assert len(searched(kb, "")) == 4


def test_a_directory_scope_never_reaches_past_the_tenant(kb: KnowledgeBase, corpus: Path) -> None:
    assert names(searched(kb, str(corpus / "docs"), tenant="globex"), corpus) == ["docs/ab/other.md"]
    assert names(searched(kb, "/", tenant="globex"), corpus) == ["docs/ab/other.md", "elsewhere/note.md"]
    assert searched(kb, str(corpus / "docs" / "a"), tenant="globex") == []  # acme's files stay acme's
    assert searched(kb, str(corpus), tenant="initech") == []


def test_a_directory_combines_with_filters_and_bad_input_is_refused(
    kb: KnowledgeBase, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only_deep = searched(kb, str(corpus / "docs" / "a"), filters={"title": "Deep"})
    assert names(only_deep, corpus) == ["docs/a/sub/deep.md"]
    with pytest.raises(DirectoryError, match="absolute"):
        searched(kb, "docs/a")
    monkeypatch.setattr(search_module, "DIRECTORY_MAX_DOCUMENTS", 1)
    with pytest.raises(QueryError, match="DIRECTORY_MAX_DOCUMENTS"):
        searched(kb, str(corpus / "docs" / "a"))


def test_the_mock_retriever_honours_the_directory(tmp_path: Path) -> None:
    mock = MockSearcher(load_settings(data_dir=tmp_path / "rag", retriever="mock"))
    hits = mock.search("brewed at what temperature and pressure", k=10, directory="/mock/kitchen").hits
    assert {hit.metadata["source"] for hit in hits} == {"/mock/kitchen/tea.md", "/mock/kitchen/espresso.md"}
    # Never nothing (the seed's mock ranks what is in scope), and nothing from outside the directory.
    unrelated = mock.search("largest planet", directory="/mock/kitchen").hits
    assert unrelated and {hit.metadata["source"] for hit in unrelated} <= {
        "/mock/kitchen/tea.md",
        "/mock/kitchen/espresso.md",
    }


# --- the graph, the CLI and the API ----------------------------------------------------------------------


@pytest.fixture
def answering(kb: KnowledgeBase, corpus: Path, install: Callable[..., Resources]) -> Resources:
    resources = install(
        TaskChatModel(replies={"generate": "The warranty lasts two years [1]."}), strength="weak"
    )
    resources.knowledge_base = kb
    return resources


def test_the_graph_searches_the_context_directory_only(answering: Resources, corpus: Path) -> None:
    context = Context(tenant="acme", directory=str(corpus / "docs" / "a"))
    out = compiled_graph("rag", None).invoke({"question": QUESTION}, context=context)
    retrieved = set(names([doc["source"] for doc in out["retrieved"]], corpus))
    assert retrieved and retrieved <= {"docs/a/guide.md", "docs/a/sub/deep.md"}
    with pytest.raises(InvalidQuestionError, match="invalid directory scope: .*not an absolute path"):
        compiled_graph("rag", None).invoke({"question": QUESTION}, context=Context(directory="docs"))


def test_rag_search_and_rag_ask_take_dir(
    answering: Resources, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(answering.settings.data_dir))
    monkeypatch.chdir(corpus)
    runner = CliRunner()
    # `rag search` opens its own knowledge base: bm25 keeps the real embedding model out of the test.
    search = ["search", QUESTION, "--tenant", "acme", "--mode", "bm25", "--dir", "docs/a", "--json"]
    found = runner.invoke(cli_app, search)
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)["hits"]
    assert names([hit["metadata"]["source"] for hit in hits], corpus) == [
        "docs/a/guide.md",
        "docs/a/sub/deep.md",
    ]
    asked = runner.invoke(cli_app, ["ask", QUESTION, "--tenant", "acme", "--dir", "docs/ab", "--json"])
    assert asked.exit_code == 0, asked.output
    sources = [source["source"] for source in json.loads(asked.stdout)["sources"]]
    assert sources and names(sources, corpus) == ["docs/ab/other.md"]
    refused = runner.invoke(cli_app, ["search", QUESTION, "--dir", "/srv/../etc"])
    assert refused.exit_code == 2 and "'..'" in refused.output and "Traceback" not in refused.output


def test_the_api_takes_a_directory_on_generate_query_and_search(answering: Resources, corpus: Path) -> None:
    scope = str(corpus / "docs" / "a")
    with serve_app(create_app(answering.settings)) as client:
        generated = client.post(
            "/api/v1/rag/generate", json={"query": QUESTION, "tenant_id": "acme", "directory": scope}
        )
        queried = client.post(
            "/api/v1/rag/query", json={"query": QUESTION, "tenant_id": "acme", "directory": scope + "/sub"}
        )
        found = client.post(
            "/api/v1/search", json={"query": QUESTION, "tenant_id": "acme", "directory": scope, "top_k": 10}
        )
        outside = client.post(
            "/api/v1/search", json={"query": QUESTION, "tenant_id": "globex", "directory": scope}
        )
        relative = client.post("/api/v1/search", json={"query": QUESTION, "directory": "docs/a"})
    assert generated.status_code == queried.status_code == found.status_code == 200
    cited = set(names([source["source"] for source in generated.json()["sources"]], corpus))
    assert cited and cited <= {"docs/a/guide.md", "docs/a/sub/deep.md"}
    assert names([source["source"] for source in queried.json()["sources"]], corpus) == ["docs/a/sub/deep.md"]
    assert names([result["source"] for result in found.json()["results"]], corpus) == [
        "docs/a/guide.md",
        "docs/a/sub/deep.md",
    ]
    assert outside.status_code == 200 and outside.json()["results"] == []
    assert relative.status_code == 422 and "directory" in relative.text and "absolute" in relative.text


def test_the_cache_scope_holds_the_directory_and_old_keys_still_match() -> None:
    plain = CacheScope(tenant="acme", collection="manuals")
    legacy = {key: value for key, value in asdict(plain).items() if key != "directory"}
    text = json.dumps(legacy, sort_keys=True, ensure_ascii=False, default=str)
    assert plain.key() == hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    assert CacheScope(tenant="acme", collection="manuals", directory="/srv").key() != plain.key()

"""End to end with the real MiniLM model on the shipped sample corpus: search quality in every mode, Chinese
keyword search, page filters on the PDF, and the `rag search` command's JSON output and error handling.

One knowledge base is built per module (embedding the corpus is the slow part) and searched read-only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import SEARCH_MODES, Searcher
from service.cli import app
from tests.conftest import SAMPLE_CORPUS, isolated_settings

pytestmark = pytest.mark.slow

SOLAR = str((SAMPLE_CORPUS / "solar_system.md").resolve())
GREAT_WALL = str((SAMPLE_CORPUS / "great_wall_zh.md").resolve())
PDF = str((SAMPLE_CORPUS / "photosynthesis.pdf").resolve())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's data folder (also handed to the CLI through RAG_DATA_DIR)."""
    return tmp_path_factory.mktemp("integration") / "rag"


@pytest.fixture(scope="module")
def real_kb(data_dir: Path) -> Iterator[KnowledgeBase]:
    """The sample corpus indexed with the real embedding model, default settings otherwise."""
    kb = KnowledgeBase(isolated_settings(data_dir.parent, data_dir=data_dir))
    summary = ingest_paths(kb, [SAMPLE_CORPUS])
    assert summary.count("failed") == 0 and summary.count("indexed") == 7
    yield kb
    kb.close()


def search(kb: KnowledgeBase, query: str, mode: str, **options: object) -> list:
    """Hits of one search."""
    return Searcher(kb).search(query, mode=mode, **options).hits  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
def test_largest_planet_is_the_jupiter_chunk_first(real_kb: KnowledgeBase, mode: str) -> None:
    hits = search(real_kb, "Which planet is the largest?", mode, k=5)
    top = hits[0]
    assert top.metadata["source"] == SOLAR
    assert top.metadata["section"] == "Jupiter"
    assert "Jupiter is the largest planet" in top.text


def test_bm25_finds_the_jupiter_chunk(real_kb: KnowledgeBase) -> None:
    hits = search(real_kb, "Which planet is the largest?", "bm25", k=5)
    assert any(hit.metadata["section"] == "Jupiter" for hit in hits)


def test_chinese_query_finds_the_great_wall_in_bm25(real_kb: KnowledgeBase) -> None:
    hits = search(real_kb, "长城有多长", "bm25", k=5)
    assert hits
    assert hits[0].metadata["source"] == GREAT_WALL
    assert all(hit.metadata["source"] == GREAT_WALL for hit in hits)  # no other document has 长城


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_pdf_page_filter(real_kb: KnowledgeBase, mode: str) -> None:
    filters = {"doc_type": "pdf", "page": 2}
    hits = search(real_kb, "How do chloroplasts use light?", mode, k=10, filters=filters)
    assert hits
    assert all((hit.metadata["source"], hit.metadata["page"]) == (PDF, 2) for hit in hits)
    assert "Light-Dependent Reactions" in hits[0].text or "thylakoid" in hits[0].text


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_calvin_cycle_page_ranks_first_without_a_filter(real_kb: KnowledgeBase, mode: str) -> None:
    hits = search(real_kb, "Calvin cycle RuBisCO carbon fixation in the stroma", mode, k=3)
    assert (hits[0].metadata["source"], hits[0].metadata["page"]) == (PDF, 3)


def test_faq_record_found_by_meaning(real_kb: KnowledgeBase) -> None:
    hits = search(real_kb, "why does the sky look blue", "dense", k=3)
    assert hits[0].metadata["doc_id"] == "faq-1"


# --- the CLI -------------------------------------------------------------------------------------------


@pytest.fixture
def cli(real_kb: KnowledgeBase, data_dir: Path) -> tuple[CliRunner, dict[str, str]]:
    """A runner and the environment that points `rag` at the module's index."""
    return CliRunner(), {"RAG_DATA_DIR": str(data_dir)}


def test_cli_search_json(cli: tuple[CliRunner, dict[str, str]]) -> None:
    runner, env = cli
    result = runner.invoke(
        app, ["search", "Which planet is the largest?", "--json", "--mode", "hybrid", "--k", "3"], env=env
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["query"] == "Which planet is the largest?"
    assert len(payload["hits"]) == 3
    assert payload["hits"][0]["metadata"]["section"] == "Jupiter"
    assert {"chunk_id", "score", "dense_score", "bm25_score", "text", "metadata"} <= set(payload["hits"][0])


def test_cli_search_json_with_filter(cli: tuple[CliRunner, dict[str, str]]) -> None:
    runner, env = cli
    args = ["search", "light", "--json", "--mode", "bm25", "--filter", '{"doc_type": "pdf", "page": 3}']
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)["hits"]
    assert hits and all(hit["metadata"]["page"] == 3 for hit in hits)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["search", ""], "empty query"),
        (["search", "   "], "empty query"),
        (["search", "planets", "--filter", '{"page": '], "not valid JSON"),
        (["search", "planets", "--filter", '{"colour-name": "red"}'], "unknown field 'colour-name'"),
        # User text that looks like rich markup must be printed as is, not parsed (or crash).
        (["search", "planets", "--filter", '{"[/x]": 1}'], "unknown field '[/x]'"),
        (["search", "planets", "--filter", '{"$or": [{"page": 1}, {"[red]": 2}]}'], "$or[1].[red]"),
        (["search", "planets", "--filter", '{"tenant": "other"}'], "cannot be filtered"),
        (["search", "planets", "--mode", "semantic"], "unknown search mode 'semantic'"),
        (["search", "planets", "--k", "0"], "k must be between"),
        (["search", "planets", "--collection", "bad name!"], "invalid collection name"),
    ],
)
def test_cli_errors_are_one_line_with_exit_code_2(
    cli: tuple[CliRunner, dict[str, str]], args: list[str], fragment: str
) -> None:
    runner, env = cli
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert "\n" not in message, message
    assert message.startswith("error:")
    assert fragment in message
    assert result.stdout == ""


def test_cli_bad_settings_are_one_line_with_exit_code_2(cli: tuple[CliRunner, dict[str, str]]) -> None:
    runner, env = cli
    result = runner.invoke(app, ["search", "planets"], env={**env, "RAG_TOP_K": "abc"})
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert "\n" not in message and "RAG_TOP_K" in message

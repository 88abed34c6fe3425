"""The shared index: with RAG_DATABASE_URL on PostgreSQL the catalog and the keyword index live
in that database, and Chroma runs as a server; every worker sees the same documents.

Each test works in a fresh database (`pg_url`) and its own tenant names on the shared Chroma server.
"""

from __future__ import annotations

import multiprocessing
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import load_settings
from core.types import Chunk
from persistence.catalog import Catalog, CatalogUnavailableError
from persistence.errors import StoreUnavailableError
from persistence.keyword_pruning import PruningPolicy
from persistence.pg_keyword_index import DF_TABLE, PG_KEYWORD_BACKENDS, POSTINGS_TABLE
from retrieval.deletion import delete_content
from retrieval.filters import FilterError, matches, parse_filter, to_sql
from retrieval.indexing import index_raw_text
from retrieval.ingest import ingest_paths
from retrieval.search import Searcher
from tests.conftest import write_corpus
from tests.helpers.servers import server_settings, unique_tenant

pytestmark = pytest.mark.servers

# Texts written for these tests (no evaluation data).
GARDEN = [
    "Tomatoes ripen faster when the greenhouse stays warm at night.",
    "A compost heap needs nitrogen from grass and carbon from dry leaves.",
    "Slugs avoid copper tape, so gardeners wrap it around raised beds.",
    "Bees visit lavender and borage more than any other herb in the garden.",
    "Watering tomatoes at the roots keeps the leaves dry and free of blight.",
    "Dry leaves shredded by a mower break down in a single season of compost.",
]


def _chunk(tenant: str, collection: str, index: int, text: str, **extra: Any) -> Chunk:
    metadata = {"tenant": tenant, "collection": collection, "title": f"note {index}", "page": index, **extra}
    return Chunk(f"{tenant}-{collection}-{index}", text, metadata)


def _load(catalog: Catalog, tenant: str, texts: list[str], collection: str = "garden", **extra: Any) -> None:
    catalog.replace_document(
        tenant=tenant,
        collection=collection,
        source=f"{tenant}.txt",
        file_hash="h",
        doc_type="txt",
        title="",
        chunks=[_chunk(tenant, collection, index, text, **extra) for index, text in enumerate(texts)],
    )


def _search(catalog: Catalog, query: str, tenant: str, node: Any = None, limit: int = 20) -> list[Any]:
    sql, params = to_sql(node, column="c.metadata", dialect=catalog.dialect)
    return catalog.keyword_search(
        query,
        tenant=tenant,
        collections=["garden"],
        filter_sql=sql,
        filter_params=params,
        limit=limit,
        title_weight=1.0,
    )


def _ranks_alike(embedded: Catalog, shared: Catalog, query: str) -> list[Any]:
    """alice's hits for `query` on Postgres, checked against FTS5's: some, same chunks, order and scores."""
    reference = _search(embedded, query, "alice")
    found = _search(shared, query, "alice")
    assert reference, query
    assert [hit.chunk_id for hit in found] == [hit.chunk_id for hit in reference], query
    for ours, theirs in zip(found, reference, strict=True):
        assert ours.score == pytest.approx(theirs.score, rel=1e-4, abs=1e-9), query
    return found


def test_postgres_bm25_ranks_like_the_embedded_fts5_index(pg_url: str, tmp_path: Path) -> None:
    """The table BM25 is FTS5's formula: same chunks, same order, same scores (FTS5 is the reference)."""
    embedded = Catalog(tmp_path / "catalog.sqlite")
    shared = Catalog(pg_url, pg_keyword_backend="bm25")
    try:
        for catalog in (embedded, shared):
            _load(catalog, "alice", GARDEN)
        # Unlike FTS5 (statistics over the whole table), the Postgres statistics are the searched
        # collections': another tenant's documents never shift alice's scores.
        _load(shared, "bob", ["Compost compost compost, and tomatoes.", "Leaves, leaves and lavender."])
        for query in ("compost leaves", "tomatoes blight", "copper slugs beds", "lavender"):
            _ranks_alike(embedded, shared, query)
    finally:
        embedded.close()
        shared.close()


@pytest.mark.parametrize("rescore_pool", [0, 10], ids=["kept-terms", "rescored"])
def test_postgres_bm25_prunes_common_terms_like_fts5(pg_url: str, tmp_path: Path, rescore_pool: int) -> None:
    """With a pruning policy both indexes drop the same common terms and still rank alike; with rescoring,
    both give the found chunks their exact scores over every term."""
    policy = PruningPolicy(
        min_chunks=4, max_df_fraction=0.3, min_terms=1, max_postings=3, rescore_pool=rescore_pool
    )
    embedded = Catalog(tmp_path / "catalog.sqlite", pruning=policy)
    shared = Catalog(pg_url, pg_keyword_backend="bm25", pruning=policy)
    unpruned = Catalog(pg_url, pg_keyword_backend="bm25")
    try:
        for catalog in (embedded, shared):
            _load(catalog, "alice", GARDEN)
        # "leaves" is in 3 of 6 chunks (over 30%): dropped; "lavender" (1 chunk) is searched alone.
        pruned = _search(shared, "leaves lavender", "alice")
        assert [hit.chunk_id for hit in pruned] == ["alice-garden-3"]
        assert len(_search(unpruned, "leaves lavender", "alice")) == 4
        inexact = 0
        for query in (
            "compost leaves",
            "tomatoes blight",
            "dry leaves compost lavender",
            "watering dry leaves",
        ):
            found = _ranks_alike(embedded, shared, query)
            exact = {hit.chunk_id: hit.score for hit in _search(unpruned, query, "alice")}
            matches_exact = [hit.score == pytest.approx(exact[hit.chunk_id], rel=1e-9) for hit in found]
            assert all(matches_exact) or not rescore_pool, query
            inexact += not all(matches_exact)
        assert inexact == 0 if rescore_pool else inexact > 0  # the kept terms alone score lower somewhere
    finally:
        embedded.close()
        shared.close()
        unpruned.close()


def _frequencies(catalog: Catalog) -> dict[tuple[str, str], int]:
    with catalog.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"SELECT term, scope, n FROM {DF_TABLE}").fetchall()
    return {(term, scope): n for term, scope, n in rows}


def _counted(catalog: Catalog) -> dict[tuple[str, str], int]:
    with catalog.engine.connect() as connection:
        rows = connection.exec_driver_sql(
            f"SELECT term, scope, count(*) FROM {POSTINGS_TABLE} GROUP BY term, scope"
        ).fetchall()
    return {(term, scope): n for term, scope, n in rows}


def test_document_frequencies_follow_every_change_and_are_rebuilt_for_old_databases(pg_url: str) -> None:
    catalog = Catalog(pg_url, pg_keyword_backend="bm25")
    try:
        _load(catalog, "alice", GARDEN)
        _load(catalog, "bob", GARDEN[:2])
        assert _frequencies(catalog) == _counted(catalog) and _counted(catalog)
        _load(catalog, "alice", GARDEN[3:])  # replaces alice's document: old postings gone, counts down
        assert _frequencies(catalog) == _counted(catalog)
        bob = catalog.document("bob", "garden", "bob.txt")
        assert bob is not None
        catalog.delete_document(bob)
        assert _frequencies(catalog) == _counted(catalog)
        assert all(n > 0 for n in _frequencies(catalog).values())
        expected = _counted(catalog)
        # A database indexed before the df table existed: opening it fills the table from the postings.
        with catalog.engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE {DF_TABLE}")
    finally:
        catalog.close()
    reopened = Catalog(pg_url, pg_keyword_backend="bm25")
    try:
        assert _frequencies(reopened) == expected
        # alice now holds GARDEN[3:]: the bees-and-lavender note is her chunk 0.
        assert [hit.chunk_id for hit in _search(reopened, "lavender bees", "alice")] == ["alice-garden-0"]
    finally:
        reopened.close()


@pytest.mark.parametrize("backend", PG_KEYWORD_BACKENDS)
def test_another_tenants_chunks_are_never_returned(pg_url: str, backend: str) -> None:
    """As an attacker: tenant eve searches for alice's canary words, names alice's chunk ids, and tries a
    tenant filter; nothing of alice's comes back, while eve's own filters still work."""
    catalog = Catalog(pg_url, pg_keyword_backend=backend)  # type: ignore[arg-type]
    try:
        _load(catalog, "alice", [*GARDEN, "The canary word is xylophonic marmalade."])
        _load(catalog, "eve", ["Eve keeps notes about compost and tomatoes.", "Eve's page two: leaves."])
        assert _search(catalog, "xylophonic marmalade", "eve") == []
        leaked = [
            hit for hit in _search(catalog, "compost tomatoes leaves", "eve") if "alice" in hit.chunk_id
        ]
        assert leaked == []
        alice_ids = [f"alice-garden-{index}" for index in range(len(GARDEN) + 1)]
        assert catalog.chunks_by_id(alice_ids, "eve") == {}
        assert set(catalog.chunks_by_id(alice_ids, "alice")) == set(alice_ids)
        with pytest.raises(FilterError):
            parse_filter({"tenant": "alice"})
        # filters still apply inside eve's scope (page is the chunk's index here)
        only_page_one = _search(catalog, "compost leaves", "eve", parse_filter({"page": {"$gte": 1}}))
        assert [hit.chunk_id for hit in only_page_one] == ["eve-garden-1"]
        # an $or that would match alice's canary text still only sees eve's rows
        either = parse_filter({"$or": [{"page": 0}, {"page": 6}]})
        assert [hit.chunk_id for hit in _search(catalog, "marmalade compost", "eve", either)] == [
            "eve-garden-0"
        ]
    finally:
        catalog.close()


FILTERS = [
    {"page": {"$gt": 2}},
    {"page": {"$lte": 1}},
    {"page": {"$in": [0, 4, 5]}},
    {"page": {"$nin": [0, 4, 5]}},
    {"page": {"$ne": 3}},
    {"$and": [{"page": {"$gte": 1}}, {"doc_type": "txt"}]},
    {"$or": [{"page": 1}, {"page": 5}]},
]


@pytest.mark.parametrize("backend", PG_KEYWORD_BACKENDS)
def test_filters_on_postgres_select_what_the_reference_semantics_select(pg_url: str, backend: str) -> None:
    catalog = Catalog(pg_url, pg_keyword_backend=backend)  # type: ignore[arg-type]
    try:
        _load(catalog, "alice", GARDEN, doc_type="txt")
        everything = {
            hit.chunk_id: hit.metadata
            for hit in _search(catalog, "tomatoes compost leaves slugs bees", "alice")
        }
        assert len(everything) == len(GARDEN)
        for raw in FILTERS:
            node = parse_filter(raw)
            expected = {chunk_id for chunk_id, metadata in everything.items() if matches(node, metadata)}
            found = {
                hit.chunk_id for hit in _search(catalog, "tomatoes compost leaves slugs bees", "alice", node)
            }
            assert found == expected, raw
    finally:
        catalog.close()


def test_knowledge_base_on_postgres_and_chroma_server(
    pg_url: str, chroma_server: tuple[str, int], tmp_path: Path, make_kb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ingest, search (dense, bm25, hybrid), delete by doc id: everything through the servers, and a second
    knowledge base (another worker) sees the same documents."""
    for name, value in server_settings(pg_url, chroma_server).items():
        monkeypatch.setenv(name, value)
    tenant = unique_tenant()
    files = write_corpus(
        tmp_path / "docs", {"tomato.md": GARDEN[0] + "\n\n" + GARDEN[4], "bees.md": GARDEN[3]}
    )
    first = make_kb(load_settings(data_dir=tmp_path / "one"))
    assert first.catalog.dialect == "postgresql"
    ingest_paths(first, [files["tomato.md"], files["bees.md"]], tenant=tenant)
    other = make_kb(load_settings(data_dir=tmp_path / "two"))  # nothing local: all shared
    for mode in ("dense", "bm25", "hybrid"):
        hits = Searcher(other).search("lavender borage bees", tenant=tenant, mode=mode, k=3).hits
        assert hits and hits[0].text.startswith("Bees visit lavender"), mode
    assert Searcher(other).search("lavender borage bees", tenant=unique_tenant(), mode="hybrid").hits == []
    index_raw_text(
        first, "A note on quinces and medlars.", tenant=tenant, collection="default", doc_id="note-1"
    )
    assert Searcher(other).search("quinces medlars", tenant=tenant, mode="bm25").hits
    delete_content(other, tenant, doc_id="note-1")
    assert Searcher(first).search("quinces medlars", tenant=tenant, mode="bm25").hits == []
    assert other.catalog.keyword_index_drift() == (0, 0, None)
    assert other.catalog.keyword_rows() == other.catalog.count_chunks() > 0


ROTATING_CHUNKS = 6
EXTRA_DOCS = 12


def _writer(url: str, rounds: int) -> None:
    """Replace one document's chunks with the next version, and add a new document, `rounds` times."""
    catalog = Catalog(url)
    try:
        for version in range(1, rounds + 1):
            texts = [f"zebra rotation version{version} part {index}" for index in range(ROTATING_CHUNKS)]
            catalog.replace_document(
                tenant="alice",
                collection="garden",
                source="rotating.txt",
                file_hash=str(version),
                doc_type="txt",
                title="",
                chunks=[
                    Chunk(
                        f"rot-{version}-{index}",
                        text,
                        {"tenant": "alice", "collection": "garden", "v": version},
                    )
                    for index, text in enumerate(texts)
                ],
            )
            if version <= EXTRA_DOCS:
                _load_extra(catalog, version)
    finally:
        catalog.close()


def _load_extra(catalog: Catalog, number: int) -> None:
    catalog.replace_document(
        tenant="alice",
        collection="garden",
        source=f"extra-{number}.txt",
        file_hash="x",
        doc_type="txt",
        title="",
        chunks=[
            Chunk(
                f"extra-{number}",
                f"unique{number}word appears once",
                {"tenant": "alice", "collection": "garden"},
            )
        ],
    )


def _reader(url: str, seconds: float, queue: Any) -> None:
    """Search the rotating document until time is up; report the versions seen and any inconsistency."""
    catalog = Catalog(url)
    seen: set[int] = set()
    problems: list[str] = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            hits = _search(catalog, "zebra rotation", "alice", limit=50)
            versions = {int(hit.metadata["v"]) for hit in hits}
            if len(versions) != 1 or len(hits) != ROTATING_CHUNKS:
                problems.append(f"{len(hits)} hits of versions {sorted(versions)}")
            seen |= versions
    except Exception as error:  # noqa: BLE001 - any error is the finding, reported to the test
        problems.append(f"{type(error).__name__}: {error}")
    finally:
        catalog.close()
    queue.put((sorted(seen), problems[:5]))


@pytest.mark.parametrize("backend", ["bm25"])
def test_ingestion_while_other_processes_serve(pg_url: str, backend: str) -> None:
    """One process rewrites a document (and adds others) while two processes search it: no errors, every
    search sees exactly one whole version, and nothing written is lost."""
    first = Catalog(pg_url, pg_keyword_backend=backend)  # type: ignore[arg-type]
    _writer(pg_url, 1)  # version 1 exists before the readers start
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    readers = [context.Process(target=_reader, args=(pg_url, 8.0, queue)) for _ in range(2)]
    for reader in readers:
        reader.start()
    writer = context.Process(target=_writer, args=(pg_url, 30))
    writer.start()
    # generous limits: a loaded 2-core machine (spawned interpreters import the engine) is slow, not wrong
    writer.join(600)
    results = [queue.get(timeout=600) for _ in readers]
    for reader in readers:
        reader.join(60)
    assert writer.exitcode == 0, f"writer exit code {writer.exitcode}"
    for versions, problems in results:
        assert problems == []
        assert versions and set(versions) <= set(range(1, 31))
    final = _search(first, "zebra rotation", "alice", limit=50)
    assert {hit.metadata["v"] for hit in final} == {30} and len(final) == ROTATING_CHUNKS
    for number in range(1, EXTRA_DOCS + 1):
        assert [hit.chunk_id for hit in _search(first, f"unique{number}word", "alice")] == [f"extra-{number}"]
    assert first.keyword_index_drift() == (0, 0, None)
    first.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_catalog_server_that_is_down_is_one_line(tmp_path: Path) -> None:
    url = f"postgresql://rag@127.0.0.1:{_closed_port()}/nothing"
    with pytest.raises(CatalogUnavailableError) as raised:
        Catalog(url)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("cannot reach the catalog database postgresql")
    env = {
        "RAG_DATABASE_URL": url,
        "RAG_DATA_DIR": str(tmp_path / "rag"),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "search", "compost", "--mode", "bm25"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot reach the catalog database" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_chroma_server_that_is_down_is_one_line_and_nothing_is_half_written(
    pg_url: str, tmp_path: Path, make_kb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in server_settings(pg_url, ("127.0.0.1", _closed_port())).items():
        monkeypatch.setenv(name, value)
    kb = make_kb(load_settings(data_dir=tmp_path / "rag"))
    tenant = unique_tenant()
    with pytest.raises(StoreUnavailableError) as raised:
        index_raw_text(kb, GARDEN[1], tenant=tenant, collection="default", doc_id="compost")
    assert "\n" not in str(raised.value) and "Chroma" in str(raised.value)
    assert kb.catalog.count_chunks(tenant) == 0  # the catalog is written after Chroma: nothing half-indexed
    _load(kb.catalog, tenant, GARDEN)  # indexed while Chroma was up: searches must now reach it
    with pytest.raises(StoreUnavailableError) as raised:
        Searcher(kb).search("compost", tenant=tenant, mode="dense", collections=["garden"])
    assert "\n" not in str(raised.value)
    assert Searcher(kb).search("compost", tenant=tenant, mode="bm25").hits  # the keyword index still serves


@pytest.fixture
def private_chroma(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A Chroma server of this test's own (`chroma run` on a free loopback port), stopped after it."""
    from benchmarks.scale_stores import chroma_server

    with chroma_server(tmp_path / "chroma", tmp_path / "chroma.log") as port:
        yield "127.0.0.1", port


def test_doctor_checks_and_repairs_the_shared_stores(
    pg_url: str,
    private_chroma: tuple[str, int],
    tmp_path: Path,
    make_kb: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`rag doctor` on the server set-up compares Chroma's ids and the Postgres keyword rows with the Postgres
    catalog (there is no local catalog file to find), and `--repair` restores both from it.

    A Chroma server of its own: the session's is shared by tests whose catalogs are other databases, and to
    the doctor their vectors are strays (a deployment pairs one Chroma server with one catalog database)."""
    from service.doctor import run_doctor

    for name, value in server_settings(pg_url, private_chroma).items():
        monkeypatch.setenv(name, value)
    tenant = unique_tenant()
    files = write_corpus(tmp_path / "docs", {"garden.md": "\n\n".join(GARDEN)})
    settings = load_settings(data_dir=tmp_path / "worker", chunk_size=20, chunk_overlap=0)
    kb = make_kb(settings)
    ingest_paths(kb, [files["garden.md"]], tenant=tenant)
    chunk_ids = sorted(kb.catalog.chunk_ids(tenant, "default"))
    assert len(chunk_ids) >= 3

    healthy = run_doctor(settings, kb=kb)
    assert healthy.healthy, healthy.as_dict()
    assert {f.store: f.status for f in healthy.findings}["vectors"] == "ok"
    assert not settings.catalog_path.exists()  # nothing local was created by the check

    kb.vectors.delete(tenant, "default", chunk_ids[:2])  # vectors lost on the Chroma server
    with kb.catalog.engine.begin() as connection:  # and one chunk's keyword rows lost in Postgres
        (row,) = connection.exec_driver_sql("SELECT min(chunk_row) FROM keyword_docs").one()
        connection.exec_driver_sql("DELETE FROM keyword_docs WHERE chunk_row = %s", (row,))
        connection.exec_driver_sql(f"DELETE FROM {POSTINGS_TABLE} WHERE chunk_row = %s", (row,))
    found = {f.store: f for f in run_doctor(settings, kb=kb).findings}
    assert found["vectors"].status == "damaged" and found["keyword index"].status == "damaged"
    assert found["keyword index"].counts["chunks_without_terms"] == 1

    repaired = run_doctor(settings, repair=True, kb=kb)
    assert repaired.healthy
    assert {f.store: f.status for f in repaired.findings}["vectors"] == "repaired"
    assert kb.vectors.ids(tenant, "default") == set(chunk_ids)
    assert kb.catalog.keyword_index_drift() == (0, 0, None)
    with kb.catalog.engine.connect() as connection:  # the rebuild recounted the document frequencies too
        counted = connection.exec_driver_sql(
            f"SELECT count(*) FROM (SELECT term, scope, count(*) AS n FROM {POSTINGS_TABLE} GROUP BY 1, 2) p "
            f"FULL JOIN {DF_TABLE} d USING (term, scope) WHERE p.n IS DISTINCT FROM d.n"
        ).scalar_one()
    assert counted == 0
    for mode in ("dense", "bm25"):
        hits = Searcher(kb).search("lavender borage bees", tenant=tenant, mode=mode, k=3).hits
        assert hits and "lavender" in hits[0].text, mode

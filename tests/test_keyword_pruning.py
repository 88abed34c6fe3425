"""Query-term pruning of the keyword index: which terms are dropped, and that search uses it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from config.settings import Settings
from core.keyword import analyze
from core.types import Chunk
from persistence import bm25, keyword_pruning
from persistence.fts_statistics import (
    DF_TABLE,
    VOCAB_TABLE,
    document_frequencies,
    index_averages,
    read_varints,
)
from persistence.keyword_index import KeywordHit, scope_token
from persistence.keyword_pruning import PruningPolicy, prune_terms
from retrieval.knowledge_base import KnowledgeBase

POLICY = PruningPolicy(min_chunks=100, max_df_fraction=0.1, min_terms=2)


def test_common_terms_are_dropped_and_order_is_kept() -> None:
    frequencies = {"cell": 400, "mitochondria": 3, "apoptosis": 8, "increas": 250}
    kept = prune_terms(["cell", "mitochondria", "increas", "apoptosis"], frequencies, 1000, POLICY)
    assert kept == ["mitochondria", "apoptosis"]


def test_the_rarest_terms_are_kept_when_every_term_is_common() -> None:
    frequencies = {"cell": 400, "increas": 250, "associ": 300}
    # The two rarest (increas 250, associ 300) stay, in query order; cell (400) goes.
    assert prune_terms(["cell", "increas", "associ"], frequencies, 1000, POLICY) == ["increas", "associ"]
    assert prune_terms(["cell"], frequencies, 1000, POLICY) == ["cell"]


def test_unseen_terms_count_as_rare_and_small_indexes_are_not_pruned() -> None:
    # zebrafish is not in the index (df 0): kept; cell is common but kept as one of the min_terms rarest.
    assert prune_terms(["zebrafish", "cell"], {"cell": 900}, 1000, POLICY) == ["zebrafish", "cell"]
    assert prune_terms(["zebrafish", "cell", "fin"], {"cell": 900}, 1000, POLICY) == ["zebrafish", "fin"]
    assert not POLICY.applies(99)
    assert POLICY.applies(100)
    assert not PruningPolicy(0, 1.0, 2).applies(10**9)


def test_the_posting_budget_keeps_the_rarest_terms_that_fit() -> None:
    budget = PruningPolicy(min_chunks=100, max_df_fraction=1.0, min_terms=1, max_postings=100)
    frequencies = {"cell": 90, "mitochondria": 3, "apoptosis": 8, "increas": 60, "fission": 40}
    terms = ["cell", "mitochondria", "increas", "apoptosis", "fission"]
    # Rarest first: 3 + 8 + 40 = 51 fit; + 60 would be 111 > 100, so increas and cell go; query order kept.
    assert prune_terms(terms, frequencies, 1000, budget) == ["mitochondria", "apoptosis", "fission"]
    # The min_terms rarest stay even when the rarest alone is over the budget.
    assert prune_terms(["cell", "increas"], frequencies, 1000, budget) == ["increas"]
    two = PruningPolicy(min_chunks=100, max_df_fraction=1.0, min_terms=2, max_postings=10)
    assert prune_terms(["cell", "increas", "fission"], frequencies, 1000, two) == ["increas", "fission"]
    # A budget alone makes a policy prune; with no budget and no fraction it prunes nothing.
    assert PruningPolicy(0, 1.0, 1, max_postings=5).applies(1)
    assert not PruningPolicy(0, 1.0, 1).applies(10**9)


def _index(
    kb: KnowledgeBase,
    texts: list[str],
    *,
    tenant: str = "t",
    source: str = "s",
    prefix: str = "c",
    title: str = "",
) -> None:
    """One document of `texts` (chunk ids prefix0, prefix1, ...) in collection "c", replacing `source`."""
    chunks = [
        Chunk(f"{prefix}{index}", text, {"tenant": tenant, "collection": "c", "title": title})
        for index, text in enumerate(texts)
    ]
    kb.catalog.replace_document(
        tenant=tenant,
        collection="c",
        source=source,
        file_hash=str(len(texts)),
        doc_type="txt",
        title="",
        chunks=chunks,
    )


def _search(kb: KnowledgeBase, query: str, tenant: str = "t", limit: int = 10) -> list[KeywordHit]:
    return kb.catalog.keyword_search(
        query,
        tenant=tenant,
        collections=["c"],
        filter_sql="1",
        filter_params=[],
        limit=limit,
        title_weight=1.0,
    )


def pruning_constants(monkeypatch: pytest.MonkeyPatch, **values: float) -> None:
    """Set persistence.keyword_pruning's constants for the catalogs opened next (the policy is read when a
    catalog opens)."""
    for name, value in values.items():
        monkeypatch.setattr(keyword_pruning, name, value)


def _glacier_report(kb: KnowledgeBase) -> list[KeywordHit]:
    return _search(kb, "glacier report")


def test_search_drops_a_term_every_chunk_has(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Index of 40 chunks: every one says "report", one says "glacier" and another "volcano".
    pruning_constants(monkeypatch, BM25_MAX_DF_FRACTION=0.5, BM25_MIN_QUERY_TERMS=1)
    kb = make_kb(make_settings(bm25_prune_min_chunks=10))
    texts = [f"Field report number {index}." for index in range(38)]
    texts += ["Field report on the glacier.", "Field report on the volcano."]
    _index(kb, texts)
    with kb.catalog.engine.connect() as connection:
        assert document_frequencies(connection, ["report", "glacier"]) == {"report": 40, "glacier": 1}
    hits = _glacier_report(kb)
    assert [hit.chunk_id for hit in hits] == ["c38"]  # "report" was dropped: only the glacier chunk matches

    unpruned = make_kb(make_settings(data_dir=kb.settings.data_dir))  # under RAG_BM25_PRUNE_MIN_CHUNKS
    hits = _glacier_report(unpruned)
    assert hits[0].chunk_id == "c38" and len(hits) == 10  # every term: all 40 chunks match "report"
    assert scope_token("t", "c") != scope_token("t", "d")


def test_rescoring_adds_the_dropped_terms_share() -> None:
    candidates = [bm25.Candidate(1, 2.0, 10), bm25.Candidate(2, 2.5, 10), bm25.Candidate(3, 1.0, 30)]
    weights = {"cell": 0.5}
    counts = {1: {"cell": 3.0}, 3: {"cell": 1.0}}
    ranked = bm25.rescore(candidates, counts, weights, avgdl=10.0)
    expected = {
        1: 2.0 + bm25.term_score(0.5, 3.0, 10, 10.0),
        2: 2.5,
        3: 1.0 + bm25.term_score(0.5, 1.0, 30, 10.0),
    }
    assert [row for row, _ in ranked] == sorted(expected, key=lambda row: -expected[row])
    assert dict(ranked) == expected
    # FTS5's per-term formula: idf x f x (k1 + 1) / (f + k1 x (1 - b + b x D / avgdl)).
    assert bm25.term_score(2.0, 1.0, 10, 10.0) == 2.0 * 2.2 / (1.0 + 1.2)
    assert bm25.idf(100, 99) == bm25.MIN_IDF


def test_fts5_averages_record_is_read_as_bm25_reads_it(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase]
) -> None:
    kb = make_kb(make_settings())
    texts = ["Field report on the glacier.", "Short note.", "A much longer field report " * 40]
    _index(kb, texts, title="Notes")
    with kb.catalog.engine.connect() as connection:
        rows, avgdl = index_averages(connection)
    # Every column's tokens: one scope token, the analysed title and body of each row.
    tokens = sum(1 + len(analyze("Notes")) + len(analyze(text)) for text in texts)
    assert (rows, avgdl) == (3, tokens / 3)
    assert read_varints(bytes([0x81, 0x00, 0x05])) == [128, 5]


def test_a_rescored_pruned_search_gives_the_exact_scores(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "report" is in 12 of 40 chunks (over the 20% share: dropped, yet its idf is positive); three chunks say
    # "glacier", one of them "report" three times.
    pruning_constants(monkeypatch, BM25_MAX_DF_FRACTION=0.2, BM25_MIN_QUERY_TERMS=1, BM25_RESCORE_POOL=50)
    kb = make_kb(make_settings(bm25_prune_min_chunks=10))
    texts = [f"Field note number {index}." for index in range(28)]
    texts += [f"Field report number {index}." for index in range(8)]
    texts += [
        "Glacier report.",
        "Glacier report, report, report.",
        "Glacier survey and report.",
        "Volcano report.",
    ]
    _index(kb, texts)
    with kb.catalog.engine.connect() as connection:
        assert document_frequencies(connection, ["report", "glacier"]) == {"report": 12, "glacier": 3}
    unpruned = make_kb(make_settings(data_dir=kb.settings.data_dir))  # under RAG_BM25_PRUNE_MIN_CHUNKS
    exact = _glacier_report(unpruned)  # FTS5's own bm25() over both terms: the reference
    rescored = _glacier_report(kb)
    assert {hit.chunk_id for hit in rescored} == {"c36", "c37", "c38"}  # found by "glacier" alone
    glacier_first = [hit for hit in exact if hit.chunk_id in {"c36", "c37", "c38"}]
    assert [hit.chunk_id for hit in rescored] == [hit.chunk_id for hit in glacier_first]
    for ours, reference in zip(rescored, glacier_first, strict=True):
        assert ours.score == pytest.approx(reference.score, rel=1e-9)

    pruning_constants(monkeypatch, BM25_RESCORE_POOL=0)
    flat = _glacier_report(make_kb(make_settings(data_dir=kb.settings.data_dir, bm25_prune_min_chunks=10)))
    assert {hit.chunk_id for hit in flat} == {"c36", "c37", "c38"}
    by_id = {hit.chunk_id: hit.score for hit in rescored}
    assert all(hit.score < by_id[hit.chunk_id] for hit in flat)  # without rescoring "report" adds nothing


def _df_table_and_vocabulary(kb: KnowledgeBase) -> tuple[dict[str, int], dict[str, int]]:
    with kb.catalog.engine.connect() as connection:
        table = dict(connection.exec_driver_sql(f"SELECT term, n FROM {DF_TABLE}").fetchall())
        vocabulary = dict(connection.exec_driver_sql(f"SELECT term, doc FROM {VOCAB_TABLE}").fetchall())
    return table, vocabulary


def test_the_document_frequency_table_follows_every_change_and_is_filled_for_old_catalogs(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase]
) -> None:
    settings = make_settings()
    kb = make_kb(settings)

    _index(
        kb,
        ["Glacier report on ice.", "Ice cores and glacier melt."],
        source="a",
        prefix="a-",
        title="Glacier notes",
    )
    _index(kb, ["Volcano report.", "Lava flows."], source="b", prefix="b-")
    table, vocabulary = _df_table_and_vocabulary(kb)
    assert table == vocabulary and table["glacier"] == 2 and table["report"] == 2
    _index(
        kb, ["Only one chunk now."], source="a", prefix="a-"
    )  # replaced: its old rows' terms are counted out
    kb.catalog.delete_document(kb.catalog.document("t", "c", "b"))  # type: ignore[arg-type]
    table, vocabulary = _df_table_and_vocabulary(kb)
    assert table == vocabulary and "glacier" not in table and "volcano" not in table
    kb.catalog.rebuild_keyword_index()
    assert _df_table_and_vocabulary(kb)[0] == vocabulary

    with kb.catalog.engine.begin() as connection:  # a catalog from before the table existed
        connection.exec_driver_sql(f"DROP TABLE {DF_TABLE}")
    reopened = make_kb(settings)
    table, vocabulary = _df_table_and_vocabulary(reopened)
    assert table == vocabulary and table


def test_a_large_index_search_without_the_scope_first_still_returns_only_the_tenants_best(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Tenant a holds 30 of 40 chunks (over half: its terms are searched without the scope first); tenant b's
    # 10 chunks say "glacier" more often, so they fill the first unscoped pool of 5 rows.
    pruning_constants(monkeypatch, BM25_RESCORE_POOL=5)
    kb = make_kb(make_settings(bm25_prune_min_chunks=10))

    harbour_and_glacier = [f"Harbour log {i}." for i in range(27)]
    harbour_and_glacier += ["Glacier melt.", "A glacier survey.", "Old glacier."]
    _index(kb, harbour_and_glacier, tenant="a", prefix="a")
    _index(kb, [f"Glacier glacier glacier {i}." for i in range(10)], tenant="b", prefix="b")

    def glacier(tenant: str, limit: int) -> list[str]:
        return [hit.chunk_id for hit in _search(kb, "glacier", tenant, limit)]

    # The unscoped pool holds only b's rows: a's search falls back to the scoped query and finds its own.
    assert sorted(glacier("a", 3)) == ["a27", "a28", "a29"]
    # b is under half of the index: scoped from the start, its own rows only.
    assert set(glacier("b", 10)) == {f"b{i}" for i in range(10)}
    assert not set(glacier("a", 10)) & {f"b{i}" for i in range(10)}
    harbour = _search(kb, "harbour log", "a", 3)
    # the unscoped pool sufficed
    assert len(harbour) == 3 and all(hit.chunk_id.startswith("a") for hit in harbour)
    assert _search(kb, "harbour log", "b", 3) == []

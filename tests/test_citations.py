"""Tests of citation resolution: marker parsing, renumbering, out-of-range and malformed markers, inferred
citations, confidence, unsupported sentences, renderings (with html escaping), English and Chinese."""

from __future__ import annotations

import pytest

from core.text import split_sentences
from retrieval.answer_text import is_garbage
from retrieval.citations import CitedAnswer, extract_markers, render, resolve_citations
from state.schemas import RetrievedDoc


def doc(index: int, text: str, *, name: str = "", title: str = "", page: int = 0) -> RetrievedDoc:
    """Passage `index` of file `name` (default doc<index>.md)."""
    name = name or f"doc{index}.md"
    return RetrievedDoc(
        chunk_id=f"chunk-{index}",
        text=text,
        source=f"/corpus/{name}",
        title=title or name,
        page=page,
        doc_id=name,
        score=1.0,
        relevance=1.0,
        query="",
        metadata={},
    )


PARIS = doc(1, "Paris is the capital and largest city of France.", title="France", page=2)
TOWER = doc(
    2, "The Eiffel Tower was completed in 1889 for the World Fair in Paris.", name="tower.pdf", page=5
)
BERLIN = doc(3, "Berlin is the capital of Germany and its largest city.")
SOURCES = [PARIS, TOWER, BERLIN]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fact [1].", [1]),
        ("Fact [1, 2].", [1, 2]),
        ("Fact [1][2] and [2].", [1, 2]),
        ("Fact [1-3].", [1, 2, 3]),
        ("事实【1】。", [1]),
        ("Fact [Source 2] then [1，3].", [2, 1, 3]),
        ("Fact [3] before [1].", [3, 1]),
        ("Malformed [1-] and [a] and [] only.", []),
        ("In [2023] nothing is cited.", []),
    ],
)
def test_extract_markers(text: str, expected: list[int]) -> None:
    assert extract_markers(text) == expected


def test_cited_sources_are_renumbered_by_first_appearance() -> None:
    answer = "The Eiffel Tower was completed in 1889 [2]. Paris is the capital of France [1][2]."
    cited = resolve_citations(answer, SOURCES)

    assert cited.text == "The Eiffel Tower was completed in 1889 [1]. Paris is the capital of France [1][2]."
    assert cited.sources == [TOWER, PARIS]
    assert [(c["marker"], c["chunk_id"], c["inferred"]) for c in cited.citations] == [
        (1, "chunk-2", False),
        (2, "chunk-1", False),
    ]
    assert cited.citations[1]["page"] == 2 and cited.citations[1]["title"] == "France"


def test_ranges_and_lists_are_rewritten_as_canonical_markers() -> None:
    cited = resolve_citations("Paris is the capital of France [1-2]. Berlin is in Germany 【3】.", SOURCES)
    assert cited.text == "Paris is the capital of France [1][2]. Berlin is in Germany [3]."
    assert len(cited.sources) == 3


def test_out_of_range_and_malformed_markers_are_dropped() -> None:
    answer = "Paris is the capital of France [3, 7]. Berlin is the capital of Germany [0] [9] [2-]."
    cited = resolve_citations(answer, SOURCES)

    assert cited.text == "Paris is the capital of France [1]. Berlin is the capital of Germany."
    assert cited.sources == [BERLIN]
    assert [c["marker"] for c in cited.citations] == [1]


def test_confidence_measures_support_of_the_citing_sentences() -> None:
    answer = "Paris is the capital of France [1]. Paris has many wonderful museums and bakeries [2]."
    cited = resolve_citations(answer, SOURCES)
    paris, tower = cited.citations
    assert paris["confidence"] == pytest.approx(1.0)
    assert 0.0 <= tower["confidence"] < 0.5


def test_unsupported_sentences_are_flagged_against_all_sources() -> None:
    answer = "Berlin is the capital of Germany [1]. Bananas grow quickly on volcanic islands [1]. Yes."
    cited = resolve_citations(answer, SOURCES)
    # The first sentence cites the wrong source but another source supports it: not flagged.
    assert cited.unsupported_sentences == ["Bananas grow quickly on volcanic islands [1]."]


def test_non_claims_are_not_flagged() -> None:
    refusal = "I could not find anything about this in the indexed documents."
    cited = resolve_citations(refusal, SOURCES, non_claims=[refusal])
    assert cited.unsupported_sentences == [] and cited.citations == [] and cited.text == refusal


def test_citations_are_inferred_when_the_answer_has_no_valid_marker() -> None:
    answer = (
        "Paris is the capital of France. The tower was completed in 1889! Cats like warm sunny windows [8]."
    )
    cited = resolve_citations(answer, SOURCES)

    assert cited.text == (
        "Paris is the capital of France [1]. The tower was completed in 1889 [2]! "
        "Cats like warm sunny windows."
    )
    assert cited.sources == [PARIS, TOWER]
    assert all(c["inferred"] for c in cited.citations)
    assert cited.citations[0]["confidence"] == pytest.approx(1.0)
    assert cited.unsupported_sentences == ["Cats like warm sunny windows."]


def test_an_inferred_marker_goes_on_the_explanation_not_on_the_short_answer_line() -> None:
    """The bold short answer stays clean; the sentence under it that states it is what cites the source."""
    cited = resolve_citations("Paris France\n\nParis is the capital of France.", SOURCES)
    assert cited.text == "Paris France\n\nParis is the capital of France [1]."
    assert cited.sources == [PARIS]
    # one paragraph is the whole claim, short or not
    assert resolve_citations("Paris is the capital of France.", SOURCES).text.endswith("[1].")


def test_no_sources_means_no_citations() -> None:
    cited = resolve_citations("Hello! How can I help you today?", [])
    assert cited.citations == [] and cited.sources == [] and cited.text == "Hello! How can I help you today?"
    assert cited.renderings["markdown"] == cited.text


def test_chinese_markers_sentences_and_inference() -> None:
    sources = [doc(1, "巴黎是法国的首都，也是法国最大的城市。"), doc(2, "柏林是德国的首都。")]
    cited = resolve_citations("柏林是德国的首都【2】。巴黎是法国最大的城市。", sources)
    assert cited.text == "柏林是德国的首都[1]。巴黎是法国最大的城市。"
    assert cited.sources == [sources[1]]

    inferred = resolve_citations("巴黎是法国的首都。柏林是德国的首都。", sources)
    assert inferred.text == "巴黎是法国的首都[1]。柏林是德国的首都[2]。"
    assert [c["inferred"] for c in inferred.citations] == [True, True]


def test_sentence_splitting_english_and_chinese() -> None:
    text = "It costs 2.5 euros, e.g. at noon. Dr. Smith agrees [1]. Really?\n- a list item\n"
    text += "巴黎很大。[2]真的吗？是"
    assert split_sentences(text) == [
        "It costs 2.5 euros, e.g. at noon.",
        "Dr. Smith agrees [1].",
        "Really?",
        "- a list item",
        "巴黎很大。[2]",
        "真的吗？",
        "是",
    ]


def test_renderings_contain_markers_and_source_lists() -> None:
    cited = resolve_citations(
        "The Eiffel Tower was completed in 1889 [2]. Paris is the capital [1].", SOURCES
    )
    markdown, html, plain = (cited.renderings[fmt] for fmt in ("markdown", "html", "plain"))

    assert markdown.startswith(cited.text)
    assert "**Sources**" in markdown
    assert "- [1] tower.pdf p.5" in markdown and "- [2] France — doc1.md p.2" in markdown
    assert '<sup><a href="#source-1">[1]</a></sup>' in html
    assert '<ol class="sources">' in html and '<li id="source-2">France — doc1.md p.2</li>' in html
    assert "Sources:\n1. tower.pdf p.5\n2. France — doc1.md p.2" in plain
    assert render(cited, "plain") == plain


def test_html_rendering_escapes_content() -> None:
    source = doc(1, "The <script> tag & its risks are documented here.", title="A <b>bold</b> title")
    cited = resolve_citations("The <script> tag & its risks are documented [1].", [source])
    html = cited.renderings["html"]
    assert "<script>" not in html and "&lt;script&gt; tag &amp; its" in html
    assert "A &lt;b&gt;bold&lt;/b&gt; title" in html


def test_render_rejects_unknown_format() -> None:
    with pytest.raises(ValueError, match="markdown"):
        render(CitedAnswer(text="x", citations=[], sources=[], unsupported_sentences=[]), "pdf")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "garbage"),
    [
        ("", True),
        ("   \n ", True),
        ("!!!!", True),
        ("。。。？", True),
        ("the answer is " * 12, True),
        ("Paris is the capital of France [1].", False),
        ("巴黎是法国的首都。", False),
    ],
)
def test_garbage_detection(text: str, garbage: bool) -> None:
    assert is_garbage(text) is garbage

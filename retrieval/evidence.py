"""Evidence compression: the few sentences of the retrieved chunks that can answer the question, each with
the sentence before it (a pronoun's subject), within a token budget: a small reader answers better and faster
from a few hundred tokens of the right sentences than from whole chunks.

Scores: lexical overlap with the question (sentence or title), dense similarity, and a small rank prior.
For multi-hop questions, sentences naming a *bridge* entity of the first picks (a name not in the question)
get a bonus, so the second hop is kept though it shares no word with the question. Instruction-like
sentences (retrieval.injection) are never kept. Kept sentences keep their offsets (`evidence_spans`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from core.keyword import analyze
from core.text import contains_cjk, sentence_spans
from query.text import capitalised_phrases
from retrieval.injection import is_instruction_like
from retrieval.tokens import count_tokens
from state.schemas import RetrievedDoc

#: Embeds a batch of texts (unit vectors); None when no embedding model is available (lexical scores only).
EmbedTexts = Callable[[list[str]], list[list[float]]]

#: Weights of a sentence's score: lexical overlap with the question, dense similarity, chunk rank prior.
LEXICAL_WEIGHT = 0.5
DENSE_WEIGHT = 0.5
RANK_PRIOR_WEIGHT = 0.1
#: Bonus of a sentence that names a bridge entity of the first pick (multi-hop questions).
BRIDGE_BONUS = 0.35
#: Sentences whose score is below this share of the best one are not kept (they would only add noise).
MIN_RELATIVE_SCORE = 0.35
#: The best sentences that seed the bridge entities (those within BRIDGE_SEED_SHARE of the best score).
BRIDGE_SEED_SENTENCES = 2
BRIDGE_SEED_SHARE = 0.6
#: A sentence of a document whose title is a bridge entity, not naming it itself: this share of the bonus.
BRIDGE_TITLE_SHARE = 0.5
#: Credit of a question term found only in the document's title (shared by all its sentences: it orders
#: documents, never lifts a sentence on its own).
TITLE_TERM_CREDIT = 0.25
#: Token overhead per kept chunk in the prompt (its "[n] (File: ...)" header and separators).
HEADER_TOKENS = 12
#: Between kept sentences of one chunk that are not adjacent in it.
GAP_MARK = " … "
#: Sentences this long (characters) are cut before scoring: a table or a run-on line is not a sentence.
MAX_SENTENCE_CHARS = 1200
#: Distinct sentences whose index terms are kept for lexical overlap.
SENTENCE_TERMS_CACHE_SIZE = 8192


@dataclass(frozen=True)
class ScoredSentence:
    """One sentence of one chunk with its offsets and score."""

    doc_index: int
    sentence_index: int
    start: int
    end: int
    text: str
    score: float


@dataclass(frozen=True)
class EvidenceReport:
    """The compressed passages and what compression did (for `prompt_info`)."""

    documents: list[RetrievedDoc]
    """The kept chunks in the given order, each with only its kept sentences as `text`."""
    tokens_before: int
    tokens_after: int
    sentences_kept: int
    bridge_entities: list[str]


def question_terms(question: str) -> set[str]:
    """The question's index terms (what lexical overlap is measured on)."""
    return set(analyze(question))


def lexical_overlap(terms: set[str], sentence: str, title_terms: set[str]) -> float:
    """Share of the question's terms in the sentence (TITLE_TERM_CREDIT for a term only in the title)."""
    if not terms:
        return 0.0
    in_sentence = terms & _sentence_terms(sentence)
    in_title = (terms - in_sentence) & title_terms
    return (len(in_sentence) + TITLE_TERM_CREDIT * len(in_title)) / len(terms)


@lru_cache(maxsize=SENTENCE_TERMS_CACHE_SIZE)
def _sentence_terms(sentence: str) -> frozenset[str]:
    """A sentence's index terms, cached: the passages a corpus's questions retrieve repeat."""
    return frozenset(analyze(sentence))


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """Cosine similarity of `query` with each vector (0 for a zero vector), the query's norm computed once."""
    query_norm = math.sqrt(sum(map(operator.mul, query, query)))
    similarities = []
    for vector in vectors:
        norm = query_norm * math.sqrt(sum(map(operator.mul, vector, vector)))
        similarities.append(sum(map(operator.mul, query, vector)) / norm if norm else 0.0)
    return similarities


def split_chunk(text: str) -> list[tuple[int, int]]:
    """Sentence offsets of a chunk; a sentence over MAX_SENTENCE_CHARS is cut into pieces of that size."""
    spans: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        while end - start > MAX_SENTENCE_CHARS:
            spans.append((start, start + MAX_SENTENCE_CHARS))
            start += MAX_SENTENCE_CHARS
        spans.append((start, end))
    return spans


def bridge_entities(
    question: str, picked: Sequence[ScoredSentence], documents: Sequence[RetrievedDoc]
) -> list[str]:
    """Entities the first picks name that the question does not: the next hop's subjects."""
    asked = question.lower()
    entities: dict[str, None] = {}
    for sentence in picked:
        title = documents[sentence.doc_index].get("title") or ""
        candidates = sorted(set(capitalised_phrases(sentence.text))) + ([title] if title else [])
        for name in candidates:
            if name.lower() not in asked and not all(word.lower() in asked for word in name.split()):
                entities[name] = None
    return list(entities)


def _mentions(entity: str, text: str) -> bool:
    return entity.lower() in text.lower()


def score_sentences(
    question: str, documents: Sequence[RetrievedDoc], embed: EmbedTexts | None
) -> list[ScoredSentence]:
    """Every sentence of every chunk, scored against the question (see the module docstring)."""
    terms = question_terms(question)
    spans = [split_chunk(doc["text"]) for doc in documents]
    texts = [
        doc["text"][start:end]
        for doc, doc_spans in zip(documents, spans, strict=True)
        for start, end in doc_spans
    ]
    dense: list[float] = [0.0] * len(texts)
    if embed is not None and texts:
        vectors = embed([question, *texts])
        dense = [max(0.0, similarity) for similarity in cosines(vectors[0], vectors[1:])]
    lexical_weight, dense_weight = (LEXICAL_WEIGHT, DENSE_WEIGHT) if embed is not None else (1.0, 0.0)
    scored: list[ScoredSentence] = []
    position = 0
    for doc_index, (doc, doc_spans) in enumerate(zip(documents, spans, strict=True)):
        prior = RANK_PRIOR_WEIGHT / (1 + doc_index)
        title_terms = set(analyze(doc.get("title") or ""))
        for sentence_index, (start, end) in enumerate(doc_spans):
            text = doc["text"][start:end]
            score = (
                lexical_weight * lexical_overlap(terms, text, title_terms)
                + dense_weight * dense[position]
                + prior
            )
            scored.append(ScoredSentence(doc_index, sentence_index, start, end, text, round(score, 4)))
            position += 1
    return scored


def _with_bridge_bonus(
    scored: list[ScoredSentence], entities: list[str], documents: Sequence[RetrievedDoc]
) -> list[ScoredSentence]:
    if not entities:
        return scored
    boosted = []
    for sentence in scored:
        title = documents[sentence.doc_index].get("title") or ""
        if any(_mentions(entity, sentence.text) for entity in entities):
            bonus = BRIDGE_BONUS
        elif any(_mentions(entity, title) for entity in entities):
            bonus = BRIDGE_BONUS * BRIDGE_TITLE_SHARE
        else:
            bonus = 0.0
        boosted.append(replace(sentence, score=round(sentence.score + bonus, 4)))
    return boosted


def _sentence_tokens(sentence: ScoredSentence) -> int:
    return count_tokens(sentence.text) + 1


def select_evidence(
    question: str,
    documents: Sequence[RetrievedDoc],
    *,
    embed: EmbedTexts | None,
    budget_tokens: int,
) -> EvidenceReport:
    """The best sentences of `documents` for `question` within `budget_tokens`, greedy by score; chunks keep
    the order of `documents`, so sources are numbered as in the whole-chunk prompt."""
    tokens_before = sum(count_tokens(doc["text"]) + HEADER_TOKENS for doc in documents)
    scored = [s for s in score_sentences(question, documents, embed) if not is_instruction_like(s.text)]
    if not scored:
        return EvidenceReport([], tokens_before, 0, 0, [])
    ranked = sorted(scored, key=lambda sentence: sentence.score, reverse=True)
    seeds = [s for s in ranked[:BRIDGE_SEED_SENTENCES] if s.score >= ranked[0].score * BRIDGE_SEED_SHARE]
    entities = [] if contains_cjk(question) else bridge_entities(question, seeds, documents)
    ranked = sorted(_with_bridge_bonus(scored, entities, documents), key=lambda s: s.score, reverse=True)
    floor = ranked[0].score * MIN_RELATIVE_SCORE
    by_position = {(s.doc_index, s.sentence_index): s for s in scored}
    kept: dict[tuple[int, int], ScoredSentence] = {}
    opened: set[int] = set()
    used = 0

    def cost(sentence: ScoredSentence) -> int:
        return _sentence_tokens(sentence) + (0 if sentence.doc_index in opened else HEADER_TOKENS)

    for sentence in ranked:
        if sentence.score < floor or used >= budget_tokens:
            break
        key = (sentence.doc_index, sentence.sentence_index)
        if key in kept:
            continue
        price = cost(sentence)
        if used + price > budget_tokens:
            continue
        kept[key] = sentence
        opened.add(sentence.doc_index)
        used += price
        before = by_position.get((sentence.doc_index, sentence.sentence_index - 1))
        if before is not None and (before.doc_index, before.sentence_index) not in kept:
            if used + _sentence_tokens(before) <= budget_tokens:
                kept[(before.doc_index, before.sentence_index)] = before
                used += _sentence_tokens(before)
    compressed = [
        compressed_document(documents[doc_index], [s for key, s in kept.items() if key[0] == doc_index])
        for doc_index in sorted(opened)
    ]
    tokens_after = sum(count_tokens(doc["text"]) + HEADER_TOKENS for doc in compressed)
    return EvidenceReport(compressed, tokens_before, tokens_after, len(kept), entities)


def compressed_document(document: RetrievedDoc, sentences: Sequence[ScoredSentence]) -> RetrievedDoc:
    """A copy of `document` holding only `sentences` (in chunk order; a gap mark between non-adjacent ones),
    with their offsets in the original text as `metadata["evidence_spans"]`."""
    ordered = sorted(sentences, key=lambda sentence: sentence.sentence_index)
    joiner = "" if contains_cjk(document["text"]) else " "
    title = (document.get("title") or "").strip()
    first = ordered[0].text if ordered else ""
    parts: list[str] = [f"{title}:{joiner}"] if title and title.lower() not in first.lower() else []
    previous = None
    for sentence in ordered:
        if previous is not None:
            parts.append(GAP_MARK if sentence.sentence_index > previous + 1 else joiner)
        parts.append(sentence.text)
        previous = sentence.sentence_index
    metadata = {
        **document["metadata"],
        "evidence_spans": [[sentence.start, sentence.end] for sentence in ordered],
        "chunk_chars": len(document["text"]),
    }
    return {**document, "text": "".join(parts), "metadata": metadata}

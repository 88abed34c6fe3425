"""Citations of a generated answer: parse `[n]` markers, resolve them to sources, score and render them.

Every claim must cite a retrieved passage, so this repairs what models write: marker variants ([1, 2],
[1][2], [1-3], 【1】, [Source 1]), out-of-range or malformed numbers (dropped), gaps (renumbered 1..m in order
of first appearance), and answers without a valid marker (citations inferred by term support, `inferred`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

from core.text import contains_cjk, sentence_spans
from retrieval.answer_text import PARAGRAPH_BREAK, answer_parts, content_terms, matches_phrase, support
from state.schemas import Citation, RetrievedDoc

RenderFormat = Literal["markdown", "html", "plain"]
RENDER_FORMATS: tuple[RenderFormat, ...] = ("markdown", "html", "plain")

#: A sentence is adequately supported when this share of its terms occurs in some source.
SUPPORT_THRESHOLD = 0.5
#: An uncited sentence gets an inferred citation to its best source when that source supports this share.
INFERRED_SUPPORT_THRESHOLD = 0.5
#: Sentences with fewer distinct terms ("Yes.", "In short:") are not claims: not checked, never cited.
MIN_CLAIM_TERMS = 2
#: A bracket group is a citation attempt only if all its numbers are at most this (not "[2023]").
MAX_MARKER_NUMBER = 100
#: Ranges longer than this ("[1-80]") are treated as malformed.
MAX_RANGE_SPAN = 20
#: Decimals of a citation's confidence.
CONFIDENCE_DECIMALS = 3

#: Any bracket group that looks like a citation attempt, with the horizontal space before it.
_GROUP = re.compile(
    r"(?P<lead>[ \t]*)[\[【]\s*(?:(?:sources?|source\s*no\.?|来源|资料|文档)\s*)?"
    r"(?P<body>\d[\d\s,，、;；\-–—~]*?)\s*[\]】]",
    re.IGNORECASE,
)
_ITEM_SPLIT = re.compile(r"[,，、;；]")
_RANGE = re.compile(r"^(\d+)\s*[-–—~]\s*(\d+)$")
_CANONICAL = re.compile(r"\[(\d+)\]")
_TRAILING_PUNCT = re.compile(r"[.!?。！？:：;；]+[\"'”’」』)）]*$")


@dataclass
class CitedAnswer:
    """An answer whose markers point at `sources` (source [n] is sources[n - 1])."""

    text: str
    citations: list[Citation]
    sources: list[RetrievedDoc]
    unsupported_sentences: list[str]
    renderings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Group:
    start: int
    end: int
    lead: str
    numbers: tuple[int, ...] | None
    """None when malformed."""


def _parse_body(body: str) -> tuple[int, ...] | None:
    """Numbers of a group body ("1, 2", "1-3"), or None when malformed."""
    numbers: list[int] = []
    for item in _ITEM_SPLIT.split(body):
        item = item.strip()
        if item.isdigit():
            numbers.append(int(item))
            continue
        match = _RANGE.match(item)
        if match is None:
            return None
        low, high = int(match.group(1)), int(match.group(2))
        if high < low or high - low > MAX_RANGE_SPAN:
            return None
        numbers.extend(range(low, high + 1))
    return tuple(numbers)


def _groups(text: str) -> list[_Group]:
    """Citation-like bracket groups of `text`, in order, adjacent ones merged (years such as "[2023]"
    excluded; a malformed group merged with a valid one just contributes no number)."""
    found: list[_Group] = []
    for match in _GROUP.finditer(text):
        numbers = _parse_body(match.group("body"))
        if numbers is not None and any(number > MAX_MARKER_NUMBER for number in numbers):
            continue
        group = _Group(match.start(), match.end(), match.group("lead"), numbers)
        if found and found[-1].end == group.start:  # adjacent groups ("[1][2]", "[1] [2]") are one citation
            group = _merge(found.pop(), group)
        found.append(group)
    return found


def _merge(first: _Group, second: _Group) -> _Group:
    """One group spanning two adjacent ones; malformed only when both are."""
    if first.numbers is None and second.numbers is None:
        numbers = None
    else:
        numbers = (*(first.numbers or ()), *(second.numbers or ()))
    return _Group(first.start, second.end, first.lead, numbers)


def _unique(numbers: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(numbers))


def extract_markers(text: str) -> list[int]:
    """Source numbers cited in `text`, in order of first appearance (malformed groups ignored)."""
    return _unique(number for group in _groups(text) for number in group.numbers or ())


def _rewrite(text: str, groups: list[_Group], mapping: dict[int, int]) -> str:
    """Replace each group by its renumbered canonical markers "[a][b]", or remove it (and its lead)."""
    pieces: list[str] = []
    position = 0
    for group in groups:
        pieces.append(text[position : group.start])
        new = sorted({mapping[number] for number in group.numbers or () if number in mapping})
        if new:
            pieces.append(group.lead + "".join(f"[{number}]" for number in new))
        position = group.end
    pieces.append(text[position:])
    return "".join(pieces)


def _claim_terms(sentence: str) -> set[str]:
    return content_terms(_CANONICAL.sub("", sentence))


def _insert_marker(sentence: str, marker: int) -> str:
    """`sentence` with "[marker]" before its final punctuation (no space before it after CJK text)."""
    tail = _TRAILING_PUNCT.search(sentence)
    cut = tail.start() if tail else len(sentence)
    body = sentence[:cut].rstrip()
    space = "" if body and contains_cjk(body[-1]) else " "
    return f"{body}{space}[{marker}]{sentence[cut:]}"


def short_answer_end(text: str) -> int:
    """Where the short-answer line an answer starts with ends (0 when there is none): the explanation under
    it carries the markers, not the bold answer."""
    short, explanation = answer_parts(text)
    gap = PARAGRAPH_BREAK.search(text)
    if not short or not explanation or gap is None:
        return 0  # one paragraph: the whole answer is the claim its marker goes on
    return gap.start()


def _infer(text: str, source_terms: list[set[str]], exempt: tuple[str, ...]) -> tuple[str, list[int]]:
    """Attach each claim sentence (not the short-answer line) to its best-supporting source above the
    threshold: (new text, cited source numbers in order of first appearance)."""
    pieces: list[str] = []
    cited: list[int] = []
    position = 0
    short_end = short_answer_end(text)
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        terms = _claim_terms(sentence)
        pieces.append(text[position:start])
        position = end
        if (
            start < short_end
            or len(terms) < MIN_CLAIM_TERMS
            or not source_terms
            or matches_phrase(sentence, exempt)
        ):
            pieces.append(sentence)
            continue
        scores = [support(terms, doc_terms) for doc_terms in source_terms]
        best = max(range(len(scores)), key=lambda index: (scores[index], -index))
        if scores[best] < INFERRED_SUPPORT_THRESHOLD:
            pieces.append(sentence)
            continue
        if best + 1 not in cited:
            cited.append(best + 1)
        pieces.append(_insert_marker(sentence, cited.index(best + 1) + 1))
    pieces.append(text[position:])
    return "".join(pieces), cited


def supporting_spans(doc: RetrievedDoc, claims: list[set[str]]) -> list[list[int]]:
    """Offsets in the chunk of the sentence that best supports each citing claim, among the sentences the
    reader was given (`evidence_spans`) when known; without any, the evidence sentences themselves."""
    text = doc["text"]
    given = doc.get("metadata", {}).get("evidence_spans") or []
    candidates = [(int(start), int(end)) for start, end in given] or sentence_spans(text)
    candidates = [(start, end) for start, end in candidates if 0 <= start < end <= len(text)]
    chosen: set[tuple[int, int]] = set()
    for terms in claims:
        scored = [(support(terms, content_terms(text[start:end])), (start, end)) for start, end in candidates]
        best = max(scored, default=(0.0, (0, 0)))
        if best[0] > 0:
            chosen.add(best[1])
    if not chosen and given:
        chosen = set(candidates)
    return [[start, end] for start, end in sorted(chosen)]


def resolve_citations(
    answer: str, sources: list[RetrievedDoc], *, non_claims: Iterable[str] = ()
) -> CitedAnswer:
    """Resolve the markers of `answer` against `sources` (marker n = sources[n - 1]). Sentences containing
    one of `non_claims` ("not found") are neither flagged as unsupported nor given inferred citations."""
    exempt = tuple(non_claims)
    source_terms = [content_terms(doc["text"]) for doc in sources]
    groups = _groups(answer)
    valid = _unique(n for group in groups for n in group.numbers or () if 1 <= n <= len(sources))
    inferred = not valid
    text = _rewrite(answer, groups, {old: index + 1 for index, old in enumerate(valid)}).strip()
    if inferred:
        text, valid = _infer(text, source_terms, exempt)
    renumbered = [sources[old - 1] for old in valid]
    sentences = [text[start:end] for start, end in sentence_spans(text)]
    citing: dict[int, list[set[str]]] = {marker: [] for marker in range(1, len(renumbered) + 1)}
    unsupported: list[str] = []
    for sentence in sentences:
        terms = _claim_terms(sentence)
        for marker in _unique(int(number) for number in _CANONICAL.findall(sentence)):
            if marker in citing and terms:
                citing[marker].append(terms)
        if len(terms) < MIN_CLAIM_TERMS or matches_phrase(sentence, exempt):
            continue
        if max((support(terms, doc_terms) for doc_terms in source_terms), default=0.0) < SUPPORT_THRESHOLD:
            unsupported.append(sentence)
    citations: list[Citation] = []
    for marker, old in enumerate(valid, start=1):
        doc, doc_terms, claims = sources[old - 1], source_terms[old - 1], citing[marker]
        confidence = sum(support(terms, doc_terms) for terms in claims) / len(claims) if claims else 0.0
        citations.append(
            Citation(
                marker=marker,
                chunk_id=doc["chunk_id"],
                source=doc.get("source", ""),
                title=doc.get("title", ""),
                page=doc.get("page", 0),
                doc_id=doc.get("doc_id", ""),
                confidence=round(confidence, CONFIDENCE_DECIMALS),
                inferred=inferred,
                spans=supporting_spans(doc, claims),
                kind=str(doc.get("metadata", {}).get("source_kind") or "document"),
            )
        )
    cited = CitedAnswer(text=text, citations=citations, sources=renumbered, unsupported_sentences=unsupported)
    cited.renderings = {fmt: render(cited, fmt) for fmt in RENDER_FORMATS}
    return cited


def _source_label(doc: RetrievedDoc) -> str:
    """The label `title — file p.X` (the title alone when it is the file name; the page only when known)."""
    name = PurePath(doc.get("source") or "").name
    title = doc.get("title") or name or "unknown"
    label = title if not name or name == title else f"{title} — {name}"
    page = doc.get("page") or 0
    return f"{label} p.{page}" if page > 0 else label


def _html_body(text: str, count: int) -> str:
    """Escaped paragraphs with in-range markers as superscript links to the source list."""

    def link(match: re.Match[str]) -> str:
        number = int(match.group(1))
        if not 1 <= number <= count:
            return match.group(0)
        return f'<sup><a href="#source-{number}">[{number}]</a></sup>'

    paragraphs = [part.strip() for part in PARAGRAPH_BREAK.split(text) if part.strip()]
    escaped = [_CANONICAL.sub(link, html.escape(part)).replace("\n", "<br>\n") for part in paragraphs]
    return "\n".join(f"<p>{part}</p>" for part in escaped)


def render(cited: CitedAnswer, fmt: RenderFormat) -> str:
    """The answer with its source list, as markdown, html (`<sup>` links to an `<ol>`) or plain text."""
    labels = [_source_label(doc) for doc in cited.sources]
    if fmt == "html":
        body = _html_body(cited.text, len(labels))
        if not labels:
            return body
        items = "\n".join(
            f'<li id="source-{number}">{html.escape(label)}</li>' for number, label in enumerate(labels, 1)
        )
        return f'{body}\n<ol class="sources">\n{items}\n</ol>'
    if fmt == "markdown":
        if not labels:
            return cited.text
        lines = "\n".join(f"- [{number}] {label}" for number, label in enumerate(labels, 1))
        return f"{cited.text}\n\n**Sources**\n\n{lines}"
    if fmt == "plain":
        if not labels:
            return cited.text
        lines = "\n".join(f"{number}. {label}" for number, label in enumerate(labels, 1))
        return f"{cited.text}\n\nSources:\n{lines}"
    raise ValueError(f"unknown rendering format {fmt!r}: choose one of {', '.join(RENDER_FORMATS)}")

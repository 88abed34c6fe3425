"""Plain-text analysis of generated answers: term support, garbage detection and the answer's parts.

One module so that citations, the answer grader and the generation fallback share one notion of "content
term" and "garbage output". Pure and model-free, English and Chinese (terms: core.keyword.analyze).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from core.keyword import analyze
from core.text import CJK_CHAR, CJK_RANGES, REFERENCE_MARK, sentence_spans, split_sentences, strip_references
from prompts.answer import NOT_FOUND_TEXTS, NOT_FOUND_VARIANTS
from retrieval.injection import is_instruction_like

#: Text units for repetition checks: Latin words and single CJK characters.
_UNIT = re.compile(f"[a-z0-9]+|[{CJK_RANGES}]")
#: A letter or digit of any script; text without one is punctuation/symbols only.
_WORD_CHAR = re.compile(r"[^\W_]")
#: Tokens a model emits when it breaks: replacement chars, leaked special tokens, long symbol runs.
_GARBAGE_TOKEN = re.compile(r"\ufffd|<\|[^|>\s]{1,40}\|>|</?s>|<unk>|<pad>|[^\w\s\[\]【】]{5,}")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")

#: A phrase (1..MAX_LOOP_PHRASE_UNITS units) repeated MIN_LOOP_REPEATS times in a row is a generation loop,
#: when the repeated stretch covers at least MIN_LOOP_UNITS units ("ha ha ha" is not a loop).
MAX_LOOP_PHRASE_UNITS = 20
MIN_LOOP_REPEATS = 4
MIN_LOOP_UNITS = 12
#: A long answer whose distinct-trigram share is below this is mostly repetition (a non-adjacent loop).
MIN_DISTINCT_TRIGRAM_SHARE = 0.3
#: Distinct-trigram share is only meaningful from this many units on.
REPETITION_MIN_UNITS = 30
#: Distinct texts whose content terms are kept (answers, sentences and passages of recent questions).
CONTENT_TERMS_CACHE_SIZE = 4096


def content_terms(text: str) -> set[str]:
    """Distinct index terms of `text` without its reference markers (a copy a caller may change)."""
    return set(_content_terms(text))


@lru_cache(maxsize=CONTENT_TERMS_CACHE_SIZE)
def _content_terms(text: str) -> frozenset[str]:
    """Cached: one question's nodes analyse the same answer and passages several times."""
    return frozenset(analyze(strip_references(text)))


def support(claim_terms: set[str], source_terms: set[str]) -> float:
    """Share of a claim's terms found in a source, in [0, 1] (0 for a claim without terms)."""
    if not claim_terms:
        return 0.0
    return len(claim_terms & source_terms) / len(claim_terms)


def text_units(text: str) -> list[str]:
    """Lowercased Latin words and single CJK characters, in order (units for repetition checks)."""
    return _UNIT.findall(text.lower())


def distinct_ngram_share(units: list[str], n: int = 3) -> float:
    """Distinct n-grams over all n-grams (1.0 when there are fewer than n units)."""
    grams = [tuple(units[index : index + n]) for index in range(len(units) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def has_phrase_loop(units: list[str]) -> bool:
    """Whether some phrase repeats MIN_LOOP_REPEATS times back to back (a weak model stuck in a loop)."""
    for length in range(1, MAX_LOOP_PHRASE_UNITS + 1):
        if length * MIN_LOOP_REPEATS < MIN_LOOP_UNITS:
            continue
        needed = length * (MIN_LOOP_REPEATS - 1)
        run = 0
        for index in range(len(units) - length):
            run = run + 1 if units[index] == units[index + length] else 0
            if run >= needed:
                return True
    return False


def garbage_token_share(text: str) -> float:
    """Garbage tokens (replacement chars, leaked special tokens, symbol runs) per whitespace token."""
    tokens = max(1, len(text.split()))
    return min(1.0, len(_GARBAGE_TOKEN.findall(text)) / tokens)


#: A reply in which one phrase of LOOP_NGRAM_UNITS units occurs LOOP_NGRAM_REPEATS times loops, even apart.
LOOP_NGRAM_UNITS = 6
LOOP_NGRAM_REPEATS = 3


def _first_repeat(text: str) -> int | None:
    """Character offset of the second occurrence of the first phrase that occurs LOOP_NGRAM_REPEATS times
    (None when no phrase repeats that often)."""
    matches = list(_UNIT.finditer(text.lower()))
    units = [match.group(0) for match in matches]
    seen: dict[tuple[str, ...], list[int]] = {}
    for index in range(len(units) - LOOP_NGRAM_UNITS + 1):
        starts = seen.setdefault(tuple(units[index : index + LOOP_NGRAM_UNITS]), [])
        if starts and index < starts[-1] + LOOP_NGRAM_UNITS:
            continue  # overlapping with the previous occurrence ("a a a a a a a"): has_phrase_loop's case
        starts.append(index)
        if len(starts) >= LOOP_NGRAM_REPEATS:
            return matches[starts[1]].start()
    return None


def is_looping(text: str) -> bool:
    """Whether a reply repeats itself: a phrase back to back (`has_phrase_loop`) or one phrase three times."""
    return has_phrase_loop(text_units(text)) or _first_repeat(text) is not None


def cut_at_repetition(text: str) -> str:
    """`text` up to where its repetition starts (unchanged when it does not repeat a phrase that often)."""
    offset = _first_repeat(text)
    return text if offset is None else text[:offset].rstrip()


def is_garbage(text: str) -> bool:
    """Whether a model reply is unusable as an answer: empty, punctuation/symbols only, or looping."""
    stripped = text.strip()
    if not stripped or not _WORD_CHAR.search(stripped):
        return True
    units = text_units(stripped)
    if has_phrase_loop(units):
        return True
    return len(units) >= REPETITION_MIN_UNITS and distinct_ngram_share(units) < MIN_DISTINCT_TRIGRAM_SHARE


def ends_properly(text: str) -> bool:
    """Whether the last sentence ends with terminal punctuation (or is a list item): no cut-off output."""
    spans = sentence_spans(text)
    if not spans:
        return False
    last = text[spans[-1][0] : spans[-1][1]]
    if _LIST_ITEM.match(last):
        return True
    bare = strip_references(last).rstrip("\"'”’」』)） \t")
    return bool(bare) and bare[-1] in ".!?。！？:：…"


def normalized(text: str) -> str:
    """Lowercased text of letters, digits and CJK only (for phrase matching that ignores punctuation)."""
    return "".join(char for char in text.lower() if _WORD_CHAR.match(char))


def matches_phrase(text: str, phrases: Iterable[str]) -> bool:
    """Whether `text` contains one of `phrases`, ignoring case, spacing and punctuation."""
    body = normalized(text)
    return any(key and key in body for key in (normalized(phrase) for phrase in phrases))


def is_not_found_answer(answer: str) -> bool:
    """Whether an answer is the engine's honest refusal (or a close paraphrase of it)."""
    body = normalized(answer)
    return any(key in body for key in _not_found_keys())


@lru_cache(maxsize=1)
def _not_found_keys() -> tuple[str, ...]:
    return tuple(key for key in (normalized(text) for text in (*NOT_FOUND_TEXTS, *NOT_FOUND_VARIANTS)) if key)


#: Passages whose factual sentences are remembered (a turn reads the same passages in several nodes).
FACTUAL_SENTENCES_CACHE = 512


@lru_cache(maxsize=FACTUAL_SENTENCES_CACHE)
def factual_sentences(text: str) -> tuple[str, ...]:
    """The sentences of a passage without its instruction-like ones (retrieval.injection): planted text is
    no fact, and copying it into an answer would deliver the injection."""
    return tuple(sentence for sentence in split_sentences(text) if not is_instruction_like(sentence))


def best_sentences(question: str, text: str, limit: int) -> list[str]:
    """Up to `limit` factual sentences of `text` sharing the most terms with `question`, in text order (the
    first sentence, the passage's lead, when none shares a term)."""
    sentences = factual_sentences(text)
    question_terms = content_terms(question)
    overlaps = [len(content_terms(sentence) & question_terms) for sentence in sentences]
    ranked = sorted(
        (index for index in range(len(sentences)) if overlaps[index]), key=lambda i: (-overlaps[i], i)
    )
    chosen = ranked[:limit] or list(range(min(1, len(sentences))))
    return [sentences[index] for index in sorted(chosen)]


def supporting_sentence(short: str, question: str, passages: list[str]) -> tuple[int, str] | None:
    """(passage index, sentence) of the factual sentence that states `short` and shares the most terms with
    `question`, or None: a bare short answer still owes the reader its evidence, and a quote is supported."""
    short_terms = content_terms(short)
    question_terms = content_terms(question)
    best: tuple[int, int, str] | None = None
    for index, text in enumerate(passages):
        for sentence in factual_sentences(text):
            terms = content_terms(sentence)
            states = short_terms <= terms if short_terms else normalized(short) in normalized(sentence)
            if not states:
                continue
            overlap = len(terms & question_terms)
            if best is None or overlap > best[0]:
                best = (overlap, index, sentence)
    return None if best is None else (best[1], best[2])


#: Boilerplate that small models put before the answer ("The answer is:", "Here is the answer:", "答案是：").
_PREAMBLE = re.compile(
    r"^\s*(?:(?:the\s+)?(?:final\s+|short\s+)?answer\s*(?:to\s+(?:this|the|your)\s+question\s*)?(?:is)?\s*[:：]"
    r"|here(?:'s|\s+is)\s+(?:the|my|your)\s+answer\s*[:：]"
    r"|(?:这个问题的|该问题的)?(?:最终)?答案(?:是|为)?\s*[:：]?)\s*",
    re.IGNORECASE,
)
#: A line that is only a label of the prompt's scaffolding ("Sources:", "Question:", "资料：").
_LABEL_ONLY = re.compile(
    r"^\s*\**\s*(?:sources?|question|answer|explanation|资料|问题|答案|解释)\s*\**\s*[:：]\s*\**\s*$",
    re.IGNORECASE,
)
#: A leading "Question:" label (a model echoing the prompt's framing before the question).
_QUESTION_LABEL = re.compile(r"^\s*(?:question|问题)\s*[:：]\s*", re.IGNORECASE)
#: An echoed sentence copies the prompt: its normalised text (at least MIN_ECHO_CHARS) is part of the
#: scaffolding, or at least ECHO_TERM_SHARE of its (at least MIN_ECHO_TERMS) terms are scaffolding terms.
MIN_ECHO_CHARS = 8
MIN_ECHO_TERMS = 4
ECHO_TERM_SHARE = 0.8


def strip_preamble(text: str) -> str:
    """The answer without a leading "The answer is:" / "答案是：" (what remains of it is the answer)."""
    stripped = _PREAMBLE.sub("", text, count=1)
    return stripped if stripped.strip() else text


def answer_body(text: str) -> str:
    """What an answer says once its preamble and reference markers are gone ("" when nothing is left)."""
    body = strip_references(_PREAMBLE.sub("", text, count=1)).strip()
    return body if _WORD_CHAR.search(body) else ""


def remove_sentences(text: str, unwanted: Callable[[str], bool]) -> str:
    """`text` without the sentences for which `unwanted` is true (the rest kept as written)."""
    pieces: list[str] = []
    position = 0
    for start, end in sentence_spans(text):
        if unwanted(text[start:end]):
            pieces.append(text[position:start])
            position = end
    pieces.append(text[position:])
    return _BLANK_RUN.sub("\n\n", "".join(pieces)).strip()


_BLANK_RUN = re.compile(r"\n\s*\n\s*")


class EchoDetector:
    """Tells whether an answer sentence merely repeats the prompt (its instructions, framing labels or the
    question): small models copy them as fluent text that passes the garbage checks. Sentences matching
    `exempt` (the "not found" sentence, which the instructions also contain) are never echoes."""

    def __init__(self, scaffolding: Iterable[str], question: str, exempt: Iterable[str] = ()) -> None:
        texts = [text for text in scaffolding if text]
        self._scaffold = "|".join(normalized(text) for text in texts)
        self._scaffold_terms: set[str] = set()
        for text in texts:
            self._scaffold_terms |= content_terms(text)
        self._question = normalized(question)
        self._question_terms = content_terms(question)
        self._exempt = tuple(exempt)

    def is_echo(self, sentence: str) -> bool:
        """Whether `sentence` repeats the prompt (see the class docstring)."""
        if self._exempt and matches_phrase(sentence, self._exempt):
            return False
        if _LABEL_ONLY.match(sentence):
            return True
        bare = strip_references(_QUESTION_LABEL.sub("", sentence)).strip()
        body = normalized(bare)
        if not body:
            return False
        if len(body) >= MIN_ECHO_CHARS and (body in self._scaffold or body in self._question):
            return True
        terms = content_terms(bare)
        if (
            bare.rstrip().endswith(("?", "？"))
            and terms
            and support(terms, self._question_terms) >= ECHO_TERM_SHARE
        ):
            return True  # the question asked back
        return len(terms) >= MIN_ECHO_TERMS and support(terms, self._scaffold_terms) >= ECHO_TERM_SHARE

    def remove(self, text: str) -> str:
        """`text` without its echoed sentences."""
        return remove_sentences(text, self.is_echo)


#: The label a reply puts before its short answer ("Answer:", "Short answer:", "答案：").
_ANSWER_LABEL = re.compile(
    r"^\s*\**\s*(?:(?:the\s+)?(?:short\s+|final\s+)?answer|答案)\s*\**\s*[:：]\s*", re.I
)
#: The label before the explanation, at a line start or inside the first line.
_EXPLANATION_LABEL = re.compile(
    r"\s*\**\s*(?:explanation|reason|evidence|解释|说明|依据)\s*\**\s*[:：]\s*", re.I
)
#: A short answer is at most this many words (a CJK character counts as half a word): longer is a sentence.
SHORT_ANSWER_MAX_WORDS = 12
#: A one-line reply without label or citation of at most this many words is a bare short answer ("Jupiter").
BARE_ANSWER_MAX_WORDS = 5
#: ...and a bare phrase that ends with a full stop has at most this many words (longer, it is a sentence).
BARE_PHRASE_WITH_STOP_WORDS = 2
_SENTENCE_STOPS = (".", "!", "?", "。", "！", "？")
_SHORT_TRAILING = " \t.,;:!?。，；！？\"'”’"


def _word_count(text: str) -> float:
    cjk = len(CJK_CHAR.findall(text))
    return len(CJK_CHAR.sub(" ", text).split()) + cjk / 2


def clean_short_answer(text: str) -> str:
    """A short answer without its label, reference markers, surrounding quotes and trailing punctuation;
    "" when it is longer than SHORT_ANSWER_MAX_WORDS words (then it is a sentence, not a short answer)."""
    bare = strip_references(_ANSWER_LABEL.sub("", text.strip(), count=1)).strip().strip(_SHORT_TRAILING)
    bare = bare.strip("*").strip()
    if not _WORD_CHAR.search(bare) or _word_count(bare) > SHORT_ANSWER_MAX_WORDS:
        return ""
    return bare


def _is_bare_phrase(line: str) -> bool:
    """A line that is a phrase, not a sentence ("Mara Velt." is a phrase, "It is called Zephyrine." not)."""
    text = line.strip()
    words = _word_count(text)
    if REFERENCE_MARK.search(text) is not None or words > BARE_ANSWER_MAX_WORDS:
        return False
    return words <= BARE_PHRASE_WITH_STOP_WORDS or not text.endswith(_SENTENCE_STOPS)


def split_short_answer(reply: str, *, allow_bare: bool = False) -> tuple[str, str]:
    """(short answer, explanation) of a reply shaped "Answer: X / Explanation: Y", tolerant of the labels
    and lines small models drop. With `allow_bare` a one-line bare phrase ("Jupiter") is a short answer;
    otherwise, or without a short first line, the short answer is "" and the reply is the explanation."""
    lines = [
        line
        for line in reply.strip().splitlines()
        if line.strip() and not _LABEL_ONLY.match(line) and not _QUESTION_LABEL.match(line)
    ]
    if not lines:
        return "", ""
    first, rest = lines[0], "\n".join(lines[1:])
    labelled = _ANSWER_LABEL.match(first) is not None
    inline = _EXPLANATION_LABEL.search(first)
    if inline is not None and inline.start() > 0:
        first, rest = first[: inline.start()], (first[inline.end() :] + "\n" + rest).strip()
    rest = _EXPLANATION_LABEL.sub("", rest, count=1) if _EXPLANATION_LABEL.match(rest) else rest
    short = clean_short_answer(first)
    lone_line = not labelled and not rest  # one unlabelled line: a sentence, unless a bare phrase is allowed
    if not short or (lone_line and not (allow_bare and _is_bare_phrase(first))):
        body = _ANSWER_LABEL.sub("", reply.strip(), count=1)
        return "", _EXPLANATION_LABEL.sub(" ", body).strip()
    return short, rest.strip()


#: The blank line between an answer's short-answer line and its explanation (`compose_answer`).
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def compose_answer(short: str, explanation: str) -> str:
    """The answer text: the short answer on its own line, then the cited explanation (either may be "")."""
    return "\n\n".join(part for part in (short.strip(), explanation.strip()) if part)


def answer_parts(answer: str) -> tuple[str, str]:
    """(short answer, explanation) of an answer text (see compose_answer); "" short answer when it opens
    with a sentence."""
    paragraphs = [part for part in PARAGRAPH_BREAK.split(answer.strip(), maxsplit=1) if part.strip()]
    if not paragraphs:
        return "", ""
    first = paragraphs[0]
    if len(paragraphs) == 1 and len(sentence_spans(first)) > 1:
        return "", answer.strip()
    short = clean_short_answer(first)
    if not short:
        return "", answer.strip()
    return short, paragraphs[1].strip() if len(paragraphs) > 1 else ""


def short_answer_of(answer: str) -> str:
    """The short answer an answer text starts with ("" when it opens with a sentence)."""
    return answer_parts(answer)[0]

"""The decision: a calibrated probability becomes one of three outcomes, and each outcome its text.

- confident (>= the calibrator's `confident` threshold): the bold short answer and its cited explanation;
  tentative instead when the explanation states another answer;
- tentative (between floor and confident): "Not sure — ..." and the closest sentence of the sources, cited;
- not found (below the floor, or nothing to show): the not-found sentence, with the reason in plain words.
The thresholds come with each calibrator, so a reader is judged by its own numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from answering.calibrator import Calibrator, Thresholds
from core.text import strip_references
from prompts.answer import NOT_FOUND_EN, NOT_FOUND_ZH, TENTATIVE_PREFIXES
from retrieval.answer_span import extract_answer
from retrieval.answer_text import compose_answer, normalized, supporting_sentence
from state.answer_record import BANDS, AnswerRecord, Band, ClosestSentence
from state.schemas import RetrievedDoc

#: Reasons of a not-found answer, in plain words (state `not_found_reason`).
REASON_NO_ANSWER = "no answer was written"
REASON_READER_DECLINED = "the reader found no answer in the passages"
REASON_MISSING_ANCHORS = "no retrieved passage mentions what the question names"
REASON_LOW_PROBABILITY = "the engine's confidence ({probability:.2f}) is below its floor ({floor:.2f})"


def band_of(probability: float, thresholds: Thresholds) -> Band:
    """The band of a probability by the calibrator's thresholds."""
    if probability >= thresholds.confident:
        return "confident"
    return "tentative" if probability >= thresholds.floor else "not_found"


def best_band(calibrator: Calibrator) -> Band:
    """The highest band the calibrator can give (its isotonic map may never reach the confident threshold)."""
    highest = max(calibrator.isotonic_y) if calibrator.isotonic_y else 1.0
    return "confident" if calibrator.thresholds.confident <= highest else "tentative"


def reached_best_band(band: Band, calibrator: Calibrator) -> bool:
    """Whether a draft's band is the highest this calibrator can give (the Self-RAG loop then stops)."""
    return BANDS.index(band) <= BANDS.index(best_band(calibrator))


def contradicts(question: str, short: str, explanation: str) -> bool:
    """Whether the explanation states another answer of the question's type than the short one."""
    body = strip_references(explanation).strip()
    if not short.strip() or not body or normalized(short) in normalized(body):
        return False
    span = extract_answer(question, [body])
    return span is not None and bool(span.text.strip()) and normalized(span.text) != normalized(short)


def closest_sentence(
    question: str, short: str, explanation: str, sources: Sequence[RetrievedDoc]
) -> ClosestSentence | None:
    """The source sentence that states the short answer (else the first claim), with its offsets."""
    texts = [doc["text"] for doc in sources]
    found = supporting_sentence(short, question, texts) if short.strip() else None
    if found is None:
        claim = strip_references(explanation).strip().split("\n")[0]
        found = supporting_sentence(claim, question, texts) if claim else None
    if found is None:
        return None
    index, sentence = found
    start = texts[index].find(sentence)
    return ClosestSentence(
        text=sentence, source=index + 1, start=max(start, 0), end=max(start, 0) + len(sentence)
    )


def decline_reason(record: AnswerRecord, thresholds: Thresholds) -> str:
    """Why an answer below the floor is not found: the strongest negative signal, else the probability."""
    signals = record["signals"]
    if signals.get("reader_declined") and not signals.get("readers_proposing"):
        return REASON_READER_DECLINED
    if signals.get("missing_anchors"):
        return REASON_MISSING_ANCHORS
    return REASON_LOW_PROBABILITY.format(probability=record["probability"], floor=thresholds.floor)


def decide(record: AnswerRecord, question: str, thresholds: Thresholds, *, has_text: bool) -> AnswerRecord:
    """The record with its band and (for a decline) reason set: the one place an answer is declined."""
    if not has_text:
        declined = record["signals"].get("reader_declined")
        return {
            **record,
            "band": "not_found",
            "decline_reason": REASON_READER_DECLINED if declined else REASON_NO_ANSWER,
        }
    band = band_of(record["probability"], thresholds)
    if band == "confident" and contradicts(question, record["short_answer"], record["explanation"]):
        band = "tentative"
    if band == "tentative" and record["closest"] is None and not record["short_answer"].strip():
        band = "not_found"  # nothing the sources state to show
    reason = decline_reason(record, thresholds) if band == "not_found" else ""
    return {**record, "band": band, "decline_reason": reason}


def rendered_answer(record: AnswerRecord, language: str, draft: str = "") -> str:
    """The answer's text for its band; confident: `draft` as written (markers refer to its sources),
    since composing the parts again would drop the markers and full stop of a one-sentence answer."""
    if record["band"] == "not_found":
        return NOT_FOUND_ZH if language == "zh" else NOT_FOUND_EN
    if record["band"] == "confident":
        return draft.strip() or compose_answer(record["short_answer"], record["explanation"])
    closest = record["closest"]
    prefix = TENTATIVE_PREFIXES[language]
    if closest is None:
        return f"{prefix} {record['short_answer']}"
    return f"{prefix} {closest['text'].strip()} [{closest['source']}]"

"""grade_answer: score the draft on four dimensions and decide what the Self-RAG loop does next.

Graders (`context.grader`: llm | score | auto = score for a weak grade model): the pure score (term overlap
with the cited sources, coverage, completeness, clarity; also the LLM grader's default) or a structured call
read leniently in the reflector form (nodes.reflection). The decision (`next_action`) is made here from state
counters and context bounds: accept (confident) | give_up (attempts spent, or more than `revision_patience`
in a row no better than the best) | retrieve (not grounded, budget left) | regenerate.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from answering.decision import reached_best_band
from core.text import strip_references
from nodes.events import emit
from nodes.instrumentation import merge_updates, structured_call, timed
from nodes.reflection import apply_reflection, read_reflection, ten_point
from nodes.resources import get_resources
from nodes.turn import answer_calibrator, current_question, judge_draft, language_of
from prompts.answer import (
    ANSWER_GRADER_PROMPT,
    ANSWER_GRADER_SYSTEM,
    PROBLEM_OFF_QUESTION,
    PROBLEM_UNCLEAR,
    PROBLEM_UNSUPPORTED,
    PROBLEM_WRONGLY_NOT_FOUND,
)
from retrieval.answer_text import (
    REPETITION_MIN_UNITS,
    content_terms,
    distinct_ngram_share,
    ends_properly,
    garbage_token_share,
    has_phrase_loop,
    is_garbage,
    is_not_found_answer,
    support,
    text_units,
)
from retrieval.answerability import CJK_QUESTION_CHARS
from retrieval.citations import extract_markers
from retrieval.grounding import ground_answer
from retrieval.source_blocks import SOURCE_SEPARATOR, format_source
from retrieval.tokens import truncate_to_tokens
from state.context import Context, run_context
from state.graph_state import State
from state.schemas import AnswerCandidate, AnswerGrade, RetrievedDoc

NextAction = Literal["accept", "give_up", "retrieve", "regenerate"]
GraderName = Literal["llm", "score", "skipped", "off"]

#: Share of an answer's terms in its cited sources that makes it grounded (without claim sentences).
GROUNDED_THRESHOLD = 0.6
#: Share of claim sentences supported (and no wrong fact) that makes an answer grounded.
GROUNDED_SENTENCE_SHARE = 0.75
#: Share of the question's terms an answer must cover to be fully relevant (answers paraphrase).
FULL_QUESTION_COVERAGE = 0.6
#: An answer with at least this many distinct terms is long enough to be complete.
COMPLETE_ANSWER_TERMS = 3
#: Weight of the question coverage of the cited passages in the relevance of a grounded answer.
CITED_EVIDENCE_WEIGHT = 0.8
#: Beyond this many distinct terms an answer is rambling: completeness capped at LONG_ANSWER_COMPLETENESS.
LONG_ANSWER_TERMS = 600
LONG_ANSWER_COMPLETENESS = 0.7
#: relevance and completeness needed for `answers_question`.
ANSWERS_QUESTION_MIN = 0.5
#: Dimensions of an honest "not found" answer, with and without a relevant source.
NOT_FOUND_WITH_RELEVANT = {"relevance": 0.3, "accuracy": 0.5, "completeness": 0.0}
NOT_FOUND_WITHOUT_RELEVANT = {"relevance": 1.0, "accuracy": 1.0, "completeness": 0.8}
#: Clarity penalties: per unit of distinct-trigram shortfall, per unit of garbage share, for a cut-off end.
REPETITION_OK_SHARE = 0.8
REPETITION_PENALTY = 2.0
GARBAGE_PENALTY = 5.0
UNFINISHED_PENALTY = 0.25
#: Meta words of answers ("according to the documents...") that are neither claims nor question terms.
META_TERMS = frozenset(
    content_terms(
        "according source sources document documents provided context passage passages answer question "
        "mention mentioned explain describe tell list give name based information"
    )
)
#: Upper bound of the LLM grader's reply.
GRADE_MAX_TOKENS = 256
#: What the loop does next, in words for a client (the `answer_graded` event's last suggestion).
SUGGESTIONS: dict[str, str] = {
    "retrieve": "search again with a reformulated query: the answer is not grounded in these sources",
    "regenerate": "rewrite the answer from the same sources, fixing the problems named",
    "give_up": "keep the best answer so far: the attempts are spent or revisions stopped improving it",
}
#: The `answer_graded` event's fields copied from the turn's `answer_grade` (plus round, action, suggestions).
EVENT_FIELDS = "score grounded answers_question grader problems reflection_score needs_improvement".split()


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))


def clarity_score(answer: str) -> float:
    """1 for clean text; lowered by repetition, garbage tokens and a cut-off ending; 0 for a loop."""
    units = text_units(answer)
    if is_garbage(answer) or has_phrase_loop(units):
        return 0.0
    penalty = 0.0
    if len(units) >= REPETITION_MIN_UNITS:
        penalty += max(0.0, REPETITION_OK_SHARE - distinct_ngram_share(units)) * REPETITION_PENALTY
    penalty += garbage_token_share(answer) * GARBAGE_PENALTY
    if not ends_properly(answer):
        penalty += UNFINISHED_PENALTY
    return _clamp(1.0 - penalty)


def _has_relevant(sources: list[RetrievedDoc], threshold: float) -> bool:
    """Whether some source is relevant (or ungraded), which makes a "not found" answer wrong: the same bar
    as grade_retrieval and generate, so a passage the run kept as relevant never lets "not found" pass."""
    grades = [doc.get("relevance", -1.0) for doc in sources]
    return any(grade >= threshold or grade < 0 for grade in grades)


def _cited_sources(answer: str, sources: list[RetrievedDoc]) -> list[RetrievedDoc]:
    """The sources the answer's in-range markers point at; all sources when it cites none."""
    cited = [sources[number - 1] for number in extract_markers(answer) if 1 <= number <= len(sources)]
    return cited or sources


def sentence_grounding(
    answer: str, sources: list[RetrievedDoc], answer_terms: set[str], source_terms: set[str]
) -> tuple[bool, float]:
    """(grounded, accuracy) from the per-sentence check, else from the share of terms in the sources."""
    report = ground_answer(answer, sources)
    if not report.claims:
        share = support(answer_terms, source_terms)
        return share >= GROUNDED_THRESHOLD, share
    share = report.supported_share
    return not report.wrong_facts and share >= GROUNDED_SENTENCE_SHARE, share


def score_answer(
    question: str, answer: str, sources: list[RetrievedDoc], *, relevance_threshold: float
) -> AnswerGrade:
    """The score-based grade of `answer` (no model); accuracy is per sentence (retrieval.grounding)."""
    clarity = clarity_score(answer)
    if is_garbage(strip_references(answer)):
        return AnswerGrade(
            grounded=False, answers_question=False, relevance=0.0, accuracy=0.0, completeness=0.0
        )
    if is_not_found_answer(answer):
        relevant = _has_relevant(sources, relevance_threshold)
        dims = NOT_FOUND_WITH_RELEVANT if relevant else NOT_FOUND_WITHOUT_RELEVANT
        return AnswerGrade(grounded=True, answers_question=not relevant, clarity=clarity, **dims)
    answer_terms = content_terms(answer) - META_TERMS
    source_terms: set[str] = set()
    for doc in _cited_sources(answer, sources):
        source_terms |= content_terms(doc["text"])
    grounded, groundedness = sentence_grounding(answer, sources, answer_terms, source_terms)
    question_terms = {
        term for term in content_terms(question) - META_TERMS if not CJK_QUESTION_CHARS & set(term)
    }
    coverage = support(question_terms, answer_terms) if question_terms else 1.0
    if grounded and question_terms:
        # A grounded short answer ("Vantaport [2]") repeats few question words; the passages it rests on
        # show whether it is about the question.
        coverage = max(coverage, CITED_EVIDENCE_WEIGHT * support(question_terms, answer_terms | source_terms))
    relevance = _clamp(coverage / FULL_QUESTION_COVERAGE)
    completeness = _clamp(len(answer_terms) / COMPLETE_ANSWER_TERMS)
    if len(answer_terms) > LONG_ANSWER_TERMS:
        completeness = LONG_ANSWER_COMPLETENESS
    return AnswerGrade(
        grounded=grounded,
        answers_question=relevance >= ANSWERS_QUESTION_MIN and completeness >= ANSWERS_QUESTION_MIN,
        relevance=round(relevance, 3),
        accuracy=round(groundedness, 3),
        completeness=round(completeness, 3),
        clarity=round(clarity, 3),
    )


#: Problems named to the next answer attempt, at most, and characters of a quoted sentence in one.
MAX_PROBLEMS = 3
PROBLEM_SENTENCE_CHARS = 160
#: Clarity below this is named as a problem.
UNCLEAR_BELOW = 0.5


def answer_problems(
    question: str,
    answer: str,
    sources: list[RetrievedDoc],
    grade: AnswerGrade,
    *,
    relevance_threshold: float,
) -> list[str]:
    """What was wrong with an answer, in words the next attempt's prompt can use."""
    language = language_of(question)
    if is_not_found_answer(answer):
        return [PROBLEM_WRONGLY_NOT_FOUND[language]] if _has_relevant(sources, relevance_threshold) else []
    problems = [
        PROBLEM_UNSUPPORTED[language].format(
            sentence=check.sentence.strip()[:PROBLEM_SENTENCE_CHARS], missing=", ".join(check.missing)
        )
        for check in ground_answer(answer, sources).wrong_facts
    ]
    if not grade.answers_question:
        problems.append(PROBLEM_OFF_QUESTION[language])
    if grade.clarity < UNCLEAR_BELOW:
        problems.append(PROBLEM_UNCLEAR[language])
    return problems[:MAX_PROBLEMS]


def mean_score(grade: AnswerGrade) -> float:
    """Mean of the four dimensions (relevance, accuracy, completeness, clarity)."""
    return round((grade.relevance + grade.accuracy + grade.completeness + grade.clarity) / 4, 3)


def stalled_after(score: float, state: State) -> int:
    """Answer attempts in a row, this one included, that did not strictly beat the best earlier one."""
    best: AnswerCandidate | None = state.get("best_answer")
    if not isinstance(best, dict) or score > best.get("score", 0.0):
        return 0
    return state.get("stalled_revisions", 0) + 1


def decide(confident: bool, grounded: bool, state: State, context: Context, stalled: int) -> NextAction:
    """accept | give_up | retrieve | regenerate, from the judgement's band and the loop counters; stalled
    revisions give up: another attempt costs a model call and a weak model mostly rewords the same answer."""
    if confident:
        return "accept"
    if state.get("generation_rounds", 0) >= context.max_iterations:
        return "give_up"
    if stalled > context.revision_patience:
        return "give_up"
    if not grounded and state.get("retrieval_rounds", 0) < context.max_iterations:
        return "retrieve"
    return "regenerate"


def _llm_grade(
    question: str, answer: str, sources: list[RetrievedDoc], default: AnswerGrade, context: Context
) -> tuple[AnswerGrade, bool, dict[str, Any]]:
    """(grade, usable, accounting) of the grade model's reply, read in the reflector's form too."""
    resources = get_resources()
    blocks = SOURCE_SEPARATOR.join(format_source(number, doc) for number, doc in enumerate(sources, 1))
    prompt = ANSWER_GRADER_PROMPT.format(
        question=question, sources=truncate_to_tokens(blocks, context.context_token_budget), answer=answer
    )
    result, usage = structured_call(
        resources.model("grade", context),
        AnswerGrade,
        [SystemMessage(ANSWER_GRADER_SYSTEM), HumanMessage(prompt)],
        default,
        json_schema=resources.supports_json_schema("grade"),
        max_tokens=GRADE_MAX_TOKENS,
    )
    reflection = read_reflection(result.raw)
    usable = result.ok or reflection.score is not None or bool(reflection.dimensions)
    return apply_reflection(result.value, reflection), usable, usage


def graded_draft(
    question: str, draft: str, sources: list[RetrievedDoc], context: Context
) -> tuple[AnswerGrade, GraderName, dict[str, Any]]:
    """(grade, grader, accounting) of a draft: the pure score, or the grade model's."""
    grade = score_answer(question, draft, sources, relevance_threshold=context.relevance_threshold)
    if not sources:
        return grade, "skipped", {}
    if not context.self_rag:
        return grade, "off", {}  # the pure score ranks the answer; no grading call, the first answer stands
    if _grader_for(context) != "llm":
        return grade, "score", {}
    checked = grade
    grade, ok, usage = _llm_grade(question, draft, sources, grade, context)
    if not checked.grounded and not is_not_found_answer(draft):
        grade = grade.model_copy(
            update={"grounded": False, "accuracy": min(grade.accuracy, checked.accuracy)}
        )
    return grade, "llm" if ok else "score", usage


def _grader_for(context: Context) -> Literal["llm", "score"]:
    if context.grader == "auto":
        return "score" if get_resources().strength("grade", context) == "weak" else "llm"
    return context.grader


@timed("grade_answer")
def grade_answer(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Grade the draft, keep it as best answer if it beats the previous ones, and set `next_action`."""
    context = run_context(runtime)
    question = current_question(state)
    draft = state.get("draft") or ""
    sources = state.get("sources") or []
    grade, grader, usage = graded_draft(question, draft, sources, context)
    # The judgement's calibrated probability is the loop's score.
    # generate's read gate may have judged this very draft already (`answer_record`).
    record = (state.get("answer_record") or judge_draft(state, context, draft, sources)) if sources else None
    score = record["probability"] if record is not None else mean_score(grade)
    stalled = stalled_after(score, state)
    graded = grader in ("llm", "score")
    # The loop stops at the highest band the calibrator can give (a weak reader's may never be confident).
    confident = record is None or reached_best_band(record["band"], answer_calibrator(context))
    action: NextAction = decide(confident, grade.grounded, state, context, stalled) if graded else "accept"
    candidate = AnswerCandidate(
        text=draft,
        score=score,
        grounded=grade.grounded,
        round=state.get("generation_rounds", 0),
        doc_ids=[doc["chunk_id"] for doc in sources],
    )
    if record is not None:
        candidate["record"] = record
    problems = (
        answer_problems(question, draft, sources, grade, relevance_threshold=context.relevance_threshold)
        if action != "accept"
        else []
    )
    # What the next round uses (generate's revision note, reformulate's query): the grader's own suggestions.
    suggestions = list(grade.suggestions) if graded and action != "accept" else []
    answer_grade = {
        **grade.model_dump(),
        "mean": mean_score(grade),
        "score": score,
        "grader": grader,
        "problems": problems,
        "suggestions": suggestions,
        "reflection_score": ten_point(score),
        "needs_improvement": graded and not confident,
    }
    if graded:
        event = {key: answer_grade[key] for key in EVENT_FIELDS}
        next_step = [SUGGESTIONS[action]] if action in SUGGESTIONS else []
        event.update(round=candidate["round"], action=action, suggestions=[*suggestions, *next_step])
        emit("answer_graded", event)
    update = {"answer_grade": answer_grade, "answer_score": score, "best_answer": candidate}
    return merge_updates({**update, "stalled_revisions": stalled, "next_action": action}, usage)

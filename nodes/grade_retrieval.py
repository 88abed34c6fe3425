"""grade_retrieval: how relevant is each retrieved passage, and is the evidence good enough to answer?

The score grader (no model) blends dense similarity with the question's term coverage, so it is never at
chance; the LLM grader asks which numbered passages help, and `auto` uses it only for strong grade models.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from core.keyword import analyze
from nodes.events import emit
from nodes.instrumentation import merge_updates, structured_call, timed
from nodes.resources import get_resources
from prompts.grading import RELEVANCE_GRADER_PROMPT, RELEVANCE_GRADER_SYSTEM
from retrieval.answerability import missing_question_anchors
from retrieval.injection import neutralize
from retrieval.tokens import truncate_to_tokens
from state.context import Context, run_context
from state.graph_state import RetrievalDecision, State
from state.schemas import RelevanceGrades, RetrievedDoc

#: Weights of the score grader: term coverage of the question, dense similarity, and RRF position.
TERM_WEIGHT = 0.6
DENSE_WEIGHT = 0.4
#: Dense similarities of MiniLM below FLOOR mean unrelated, above CEILING clearly related.
DENSE_FLOOR = 0.15
DENSE_CEILING = 0.65
#: Passages graded per LLM call, and tokens shown per passage.
LLM_GRADE_MAX_PASSAGES = 8
LLM_PASSAGE_TOKENS = 180
LLM_GRADE_MAX_TOKENS = 64
#: An LLM "relevant" verdict lifts the score grade to at least this.
LLM_RELEVANT_FLOOR = 0.75
#: Relevant passages needed for the evidence to count as good.
MIN_RELEVANT = 1


def term_coverage(question_terms: set[str], text: str) -> float:
    """Share of the question's distinct content terms present in `text`."""
    if not question_terms:
        return 0.0
    return len(question_terms & set(analyze(text))) / len(question_terms)


def dense_component(doc: RetrievedDoc) -> float:
    """Dense similarity rescaled to [0, 1] between the floor and ceiling (0 when there is none)."""
    similarity = doc["metadata"].get("dense_score")
    if similarity is None:
        return 0.0
    return min(1.0, max(0.0, (float(similarity) - DENSE_FLOOR) / (DENSE_CEILING - DENSE_FLOOR)))


def score_relevance(question: str, doc: RetrievedDoc) -> float:
    """Score-grader relevance of one passage in [0, 1]."""
    terms = set(analyze(question))
    coverage = term_coverage(terms, doc["title"] + "\n" + doc["text"])
    if doc["metadata"].get("dense_score") is None:
        return coverage
    return TERM_WEIGHT * coverage + DENSE_WEIGHT * dense_component(doc)


def uncovered_terms(question: str, relevant: list[RetrievedDoc]) -> list[str]:
    """Question terms that no relevant passage contains (what reformulation should look for)."""
    covered: set[str] = set()
    for doc in relevant:
        covered |= set(analyze(doc["title"] + "\n" + doc["text"]))
    return [term for term in dict.fromkeys(analyze(question)) if term not in covered]


def llm_relevance_grades(
    question: str, docs: list[RetrievedDoc], context: Context
) -> tuple[set[int] | None, dict[str, Any]]:
    """The 1-based numbers of the passages the grade model judged relevant (None when its reply was unusable
    twice), with the call's accounting; `python -m benchmarks graders` measures this exact call."""
    resources = get_resources()
    listing = "\n\n".join(
        f"[{index}] {neutralize(truncate_to_tokens(doc['text'], LLM_PASSAGE_TOKENS))}"
        for index, doc in enumerate(docs, start=1)
    )
    messages = [
        SystemMessage(RELEVANCE_GRADER_SYSTEM),
        HumanMessage(RELEVANCE_GRADER_PROMPT.format(question=question, passages=listing)),
    ]
    result, accounting = structured_call(
        resources.model("grade", context),
        RelevanceGrades,
        messages,
        RelevanceGrades(),
        json_schema=resources.supports_json_schema("grade"),
        max_tokens=LLM_GRADE_MAX_TOKENS,
    )
    if not result.ok:
        return None, accounting
    return {number for number in result.value.relevant if 1 <= number <= len(docs)}, accounting


def use_llm_grader(context: Context) -> bool:
    """Whether this run grades with the LLM (explicitly, or `auto` with a strong grading model)."""
    if context.grader == "llm":
        return True
    return context.grader == "auto" and get_resources().strength("grade", context) == "strong"


@timed("grade_retrieval")
def grade_retrieval(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Grade every ungraded passage; report the evidence score and the question terms still missing."""
    context = run_context(runtime)
    question = state.get("standalone_question") or state.get("question", "")
    documents = list(state.get("documents") or [])
    ungraded = [doc for doc in documents if doc["relevance"] < 0]
    graded: list[RetrievedDoc] = [
        {**doc, "relevance": round(score_relevance(question, doc), 4)} for doc in ungraded
    ]
    accounting: dict[str, Any] = {}
    if graded and use_llm_grader(context):
        top = sorted(graded, key=lambda doc: doc["score"], reverse=True)[:LLM_GRADE_MAX_PASSAGES]
        verdicts, accounting = llm_relevance_grades(question, top, context)
        if verdicts is not None:
            chosen = {top[number - 1]["chunk_id"] for number in verdicts}
            graded = [
                {**doc, "relevance": max(doc["relevance"], LLM_RELEVANT_FLOOR)}
                if doc["chunk_id"] in chosen
                else {**doc, "relevance": min(doc["relevance"], context.relevance_threshold * 0.5)}
                if doc in top
                else doc
                for doc in graded
            ]
    by_id = {doc["chunk_id"]: doc for doc in graded}
    everything = [by_id.get(doc["chunk_id"], doc) for doc in documents]
    relevant = [doc for doc in everything if doc["relevance"] >= context.relevance_threshold]
    best = sorted((doc["relevance"] for doc in everything), reverse=True)[: max(1, context.top_k // 2)]
    # Recalled memories passed the recall's similarity bar, so each counts as a relevant passage.
    memories = state.get("recalled_memories") or []
    update = {
        "documents": graded,
        "retrieval_score": round(sum(best) / len(best), 4) if best else 0.0,
        "missing_terms": uncovered_terms(question, [*relevant, *memories]),
        "retrieval_decision": decide_after_retrieval(
            state,
            context,
            found=bool(everything or memories),
            relevant=len(relevant) + len(memories),
            unanswerable=bool(missing_question_anchors(question, [*everything, *memories])),
        ),
    }
    emit(
        "documents_retrieved",
        {"count": len(everything), "relevant": len(relevant), "decision": update["retrieval_decision"]},
    )
    return merge_updates(update, accounting) if accounting else update


def decide_after_retrieval(
    state: State, context: Context, *, found: bool, relevant: int, unanswerable: bool = False
) -> RetrievalDecision:
    """What follows the grades (pure; `found` and `relevant` count the recalled memories with the passages):
    - nothing retrieved at all (empty scope, or the store is down, and no memory) -> not_found; in chat mode
      (`answer_source="chat"`) an empty scope -> generate, which answers from the conversation history;
    - an ITERATIVE question with hops left -> reformulate (the next hop), within the round budget;
    - enough relevant passages -> generate;
    - too few, with retrieval rounds left -> reformulate; else generate from the best there is, unless no
      passage is relevant and a name or number of the question is in none of them (`unanswerable`,
      retrieval.answerability): then not_found (RAG mode; chat mode answers from the conversation)."""
    if not found:
        return "generate" if context.answer_source == "chat" and not state.get("error") else "not_found"
    rounds_left = state.get("retrieval_rounds", 0) < context.max_iterations
    if (
        state.get("strategy") == "ITERATIVE"
        and state.get("hops", 0) + 1 < context.iterative_hops
        and rounds_left
    ):
        return "reformulate"
    if relevant >= MIN_RELEVANT:
        return "generate"
    if rounds_left:
        return "reformulate"
    return "not_found" if unanswerable and context.answer_source != "chat" else "generate"

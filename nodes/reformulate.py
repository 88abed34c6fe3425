"""reformulate: the next retrieval round's queries, after poor grades or for the next ITERATIVE hop.

Feedback rather than a fresh rewrite: the previous round says what is missing (a bridge hop's names, the
terms no relevant passage contained, sub-questions not searched yet, the grader's suggestions). A strong
model writes the query from it; heuristics are its fallback. At least one query comes back, never one already
searched this turn; a retry follows RAG_RETRY_STRATEGY (nodes.retry_strategy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from nodes.events import emit
from nodes.instrumentation import merge_updates, text_call, timed
from nodes.resources import get_resources
from nodes.retry_strategy import RETRY_EXPAND_FACTOR, RetryPlan, plan_retry
from nodes.search_queries import normalized, search_query, valid_query
from prompts.query import NEXT_HOP_PROMPT, REFORMULATE_PROMPT, REFORMULATE_SUGGESTIONS, REFORMULATE_SYSTEM
from query.decomposition import MAX_SUBQUESTIONS, heuristic_subquestions
from query.feedback import bridge_terms, missing_terms, surface_terms
from query.text import capitalised_phrases, is_chinese, keyword_query, quoted_titles
from query.variants import heuristic_expansion
from retrieval.search_depth import CANDIDATE_K
from state.context import Context, run_context
from state.graph_state import State
from state.schemas import RetrievedDoc, SearchQuery

#: Bridge names appended to the next hop's query.
BRIDGE_TERMS_LIMIT = 3
#: Queries of one reformulated round, at most (the main one plus one uncovered sub-question).
MAX_REFORMULATIONS = 2
#: Completion cap of a model-written query.
REFORMULATE_MAX_TOKENS = 64
#: Queries and passage titles shown to the model.
PROMPT_TRIED_QUERIES = 6
PROMPT_FOUND_TITLES = 3
#: Generic words appended, in turn, when every candidate was already searched.
REPHRASE_TERMS = ("background", "details", "overview", "history", "facts")
#: The query of last resort when there is no candidate at all (an empty question).
FALLBACK_QUERY = "search"


def relevant_documents(documents: Sequence[RetrievedDoc], threshold: float) -> list[RetrievedDoc]:
    """Graded passages at or above the threshold, best first."""
    chosen = [doc for doc in documents if doc["relevance"] >= threshold]
    return sorted(chosen, key=lambda doc: doc["relevance"], reverse=True)


def question_names(question: str) -> list[str]:
    """Titles and names of the question (what a focused query keeps)."""
    return [*quoted_titles(question), *([] if is_chinese(question) else capitalised_phrases(question))]


def _without_mark(text: str) -> str:
    return text.strip().rstrip("?？").strip()


def _uncovered(subquestions: Sequence[str], tried: set[str]) -> list[str]:
    return [text for text in subquestions if normalized(text) not in tried]


def hop_candidates(
    question: str, documents: Sequence[RetrievedDoc], tried: set[str], context: Context
) -> list[str]:
    """Next ITERATIVE hop: the rest of the question plus the bridge names, then unsearched sub-questions."""
    bridge = bridge_terms(question, documents, BRIDGE_TERMS_LIMIT, context.relevance_threshold)
    if not bridge:
        bridge = bridge_terms(question, documents, BRIDGE_TERMS_LIMIT, 0.0)
    subquestions = heuristic_subquestions(question, MAX_SUBQUESTIONS)
    uncovered = _uncovered(subquestions, tried)
    missing = missing_terms(question, documents, context.relevance_threshold)
    remaining = (
        _without_mark(subquestions[-1]) if subquestions else " ".join(missing) or keyword_query(question)
    )
    main = f"{remaining} {' '.join(bridge)}".strip()
    return [main, *uncovered]


def suggestion_queries(question: str, suggestions: Sequence[str]) -> list[str]:
    """One query per grader suggestion: the question's keywords, then the suggestion's not among them."""
    base = keyword_query(question)
    known = set(base.casefold().split())
    queries = []
    for suggestion in suggestions:
        extra = [word for word in keyword_query(suggestion).split() if word.casefold() not in known]
        if extra:
            queries.append(f"{base} {' '.join(dict.fromkeys(extra))}".strip())
    return queries


def feedback_candidates(
    question: str,
    missing: Sequence[str],
    documents: Sequence[RetrievedDoc],
    tried: set[str],
    context: Context,
    suggestions: Sequence[str] = (),
) -> list[str]:
    """Candidate queries after poor grades, best first."""
    uncovered = _uncovered(heuristic_subquestions(question, MAX_SUBQUESTIONS), tried)
    candidates: list[str] = suggestion_queries(question, suggestions)
    if missing:
        candidates.append(f"{_without_mark(question)} {' '.join(missing)}")
    candidates += uncovered
    if missing:
        candidates.append(" ".join(dict.fromkeys([*question_names(question), *missing])))
    feedback = bridge_terms(question, documents, BRIDGE_TERMS_LIMIT, context.relevance_threshold)
    candidates += [keyword_query(question), heuristic_expansion(question)]
    if feedback:
        candidates.append(f"{keyword_query(question)} {' '.join(feedback)}")
    return candidates


def make_new(candidates: Sequence[str], tried: set[str], extra_terms: Sequence[str]) -> list[str]:
    """The distinct candidates not searched yet, else the first made new by adding terms; never empty."""
    fresh: list[str] = []
    seen = set(tried)
    for text in candidates:
        key = normalized(text)
        if key and key not in seen:
            seen.add(key)
            fresh.append(text.strip())
    if fresh:
        return fresh
    base = next((text.strip() for text in candidates if text.strip()), "") or FALLBACK_QUERY
    if normalized(base) not in tried:
        return [base]
    added: list[str] = []
    for term in [*extra_terms, *REPHRASE_TERMS]:
        if term.casefold() in base.casefold() or term in added:
            continue
        added.append(term)
        text = f"{base} {' '.join(added)}"
        if normalized(text) not in tried:
            return [text]
    counter = 2
    while normalized(f"{base} ({counter})") in tried:
        counter += 1
    return [f"{base} ({counter})"]


def model_query(
    question: str,
    documents: Sequence[RetrievedDoc],
    missing: Sequence[str],
    tried: Sequence[str],
    iterative: bool,
    context: Context,
    suggestions: Sequence[str] = (),
) -> tuple[str | None, dict[str, Any]]:
    """A query a strong model writes from the feedback, or None (weak model, unusable reply, or repeated)."""
    resources = get_resources()
    if resources.strength("generate", context) != "strong":
        return None, {}
    found = ", ".join(dict.fromkeys(doc["title"] or doc["source"] for doc in documents[:PROMPT_FOUND_TITLES]))
    if iterative:
        bridge = bridge_terms(question, documents, BRIDGE_TERMS_LIMIT, context.relevance_threshold)
        prompt = NEXT_HOP_PROMPT.format(
            question=question, found=found or "nothing", bridge=", ".join(bridge) or "none"
        )
    else:
        prompt = REFORMULATE_PROMPT.format(
            question=question,
            tried="\n".join(f"- {text}" for text in tried[-PROMPT_TRIED_QUERIES:]) or "- (none)",
            missing=", ".join(missing) or "(unknown)",
            found=found or "nothing relevant",
            suggestions=REFORMULATE_SUGGESTIONS.format(
                suggestions="\n".join(f"- {text}" for text in suggestions)
            )
            if suggestions
            else "",
        )
    messages = [SystemMessage(REFORMULATE_SYSTEM), HumanMessage(prompt)]
    reply, _error, accounting = text_call(
        resources.model("generate", context), messages, max_tokens=REFORMULATE_MAX_TOKENS
    )
    text = valid_query(reply, f"{question} {' '.join(missing)} {found}")
    if text is None or normalized(text) in {normalized(query) for query in tried}:
        return None, accounting
    return text, accounting


def answer_suggestions(state: State) -> list[str]:
    """The grader's suggestions when this round follows an answer sent back to retrieval (else none)."""
    if state.get("next_action") != "retrieve":
        return []
    return [str(text) for text in (state.get("answer_grade") or {}).get("suggestions") or []]


def new_queries(
    state: State, question: str, documents: list[RetrievedDoc], iterative: bool, context: Context
) -> tuple[list[str], dict[str, Any]]:
    """New query texts (the model's, else the best heuristic ones) and the model call's accounting."""
    relevant = relevant_documents(documents, context.relevance_threshold)
    tried_texts = list(state.get("queries_run") or [])
    tried = {normalized(text) for text in tried_texts}
    graded_missing = list(state.get("missing_terms") or [])
    missing = (
        surface_terms(question, graded_missing)
        if graded_missing
        else missing_terms(question, documents, context.relevance_threshold)
    )
    suggestions = [] if iterative else answer_suggestions(state)
    ranked = relevant or sorted(documents, key=lambda doc: doc["score"], reverse=True)
    written, accounting = model_query(question, ranked, missing, tried_texts, iterative, context, suggestions)
    if written:
        return [written], accounting
    if iterative:
        candidates = hop_candidates(question, documents, tried, context)
    else:
        candidates = feedback_candidates(question, missing, documents, tried, context, suggestions)
    extra = [*bridge_terms(question, documents, BRIDGE_TERMS_LIMIT, 0.0), *missing]
    return make_new(candidates, tried, extra)[:MAX_REFORMULATIONS], accounting


def retry_plan(state: State, context: Context, iterative: bool) -> RetryPlan:
    """This round's plan: a hop writes a new query at the same depth; a retry follows the strategy."""
    depth = max(1, int(state.get("retrieval_depth") or 1))
    if iterative:
        return RetryPlan(same_queries=False, rewrite=True, depth=depth)
    return plan_retry(context.retry_strategy, depth, RETRY_EXPAND_FACTOR, context.top_k, CANDIDATE_K)


@timed("reformulate")
def reformulate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Set the next round's `queries` and depth by the retry plan; count the round (and the hop)."""
    context = run_context(runtime)
    question = state.get("standalone_question") or state.get("question") or ""
    documents = list(state.get("documents") or [])
    iterative = state.get("strategy") == "ITERATIVE"
    plan = retry_plan(state, context, iterative)
    queries: list[SearchQuery] = []
    accounting: dict[str, Any] = {}
    if plan.same_queries:
        queries += list(state.get("queries") or []) or [search_query(question, "original")]
    if plan.rewrite:
        texts, accounting = new_queries(state, question, documents, iterative, context)
        queries += [search_query(text, "hop" if iterative else "reformulation") for text in texts]
    update: dict[str, Any] = {
        "queries": queries,
        "queries_run": [query["text"] for query in queries],
        "retrieval_rounds": 1,
        "retrieval_depth": plan.depth,
    }
    if iterative:
        update["hops"] = 1
    round_number = state.get("retrieval_rounds", 0) + 1
    emit(
        "query_rewritten",
        {
            "queries": update["queries_run"],
            "strategy": state.get("strategy"),
            "round": round_number,
            "retry": "hop" if iterative else plan.name,
            "depth": plan.depth,
        },
    )
    return merge_updates(update, accounting) if accounting else update

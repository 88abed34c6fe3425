"""rewrite: the first round's search queries, by strategy (or by the fixed method `context.rewrite`).

- none (DIRECT): the question;
- multi (HYBRID): the question + up to `query_variants` variants;
- hyde (HYDE): the question, its dense text a hypothetical answer passage;
- decompose (QUERY_DECOMPOSITION): the question + 2..MAX_SUBQUESTIONS sub-questions;
- hop (ITERATIVE, first hop): the question + the inner bridge question, or one question per compared item;
- expand: the question + expanded keyword queries;
- advanced (mode=advanced with rewrite auto): ADVANCED_QUERIES queries in all, each retrieving a share of k.

The question itself is always first: a rewrite may only add recall. Strong models write the variants,
passages and sub-questions; for a weak model (and on any model failure) heuristics do, and HyDE searches the
question plus a keyword expansion instead of a hallucinated passage.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from nodes.events import emit
from nodes.instrumentation import merge_updates, structured_call, text_call, timed
from nodes.resources import get_resources
from nodes.search_queries import search_query, unique_queries, valid_passage, valid_queries
from prompts.query import (
    DECOMPOSE_PROMPT,
    DECOMPOSE_SYSTEM,
    EXPAND_PROMPT,
    EXPAND_SYSTEM,
    HYDE_PROMPT,
    HYDE_SYSTEM,
    MULTI_QUERY_PROMPT,
    MULTI_QUERY_SYSTEM,
)
from query.decomposition import MAX_SUBQUESTIONS, heuristic_subquestions
from query.signals import question_signals
from query.variants import heuristic_expansion, heuristic_variants
from retrieval.search_depth import ADVANCED_QUERIES
from state.context import Context, run_context
from state.graph_state import State
from state.schemas import RewrittenQueries, SearchQuery, SubQuestions

#: Rewrite method of each strategy when `context.rewrite` is auto.
STRATEGY_METHODS: dict[str, str] = {
    "DIRECT": "none",
    "HYBRID": "multi",
    "HYDE": "hyde",
    "QUERY_DECOMPOSITION": "decompose",
    "ITERATIVE": "hop",
}
#: Completion caps: a JSON list of short queries, and a HyDE passage of a few sentences.
QUERIES_MAX_TOKENS = 200
HYDE_MAX_TOKENS = 256
#: Sub-questions a decomposition needs to be worth more than the question alone.
MIN_SUBQUESTIONS = 2

Accounting = dict[str, Any]


def rewrite_method(strategy: str, context: Context) -> str:
    """The context's fixed rewrite method, else "advanced" for mode=advanced, else the strategy's."""
    if context.rewrite != "auto":
        return context.rewrite
    if context.mode == "advanced":
        return "advanced"
    return STRATEGY_METHODS.get(strategy, "none")


def _strong(context: Context) -> bool:
    return get_resources().strength("generate", context) == "strong"


def _model_queries(
    question: str, system: str, prompt: str, context: Context, fallback: list[str]
) -> tuple[list[str], Accounting]:
    """Queries a strong model writes for a RewrittenQueries prompt; `fallback` when none is usable."""
    resources = get_resources()
    messages = [SystemMessage(system), HumanMessage(prompt)]
    result, accounting = structured_call(
        resources.model("generate", context),
        RewrittenQueries,
        messages,
        RewrittenQueries(queries=fallback),
        json_schema=resources.supports_json_schema("generate"),
        max_tokens=QUERIES_MAX_TOKENS,
    )
    written = valid_queries(result.value.queries, question, exclude=[question]) if result.ok else []
    return written or fallback, accounting


def multi_queries(question: str, context: Context) -> tuple[list[SearchQuery], Accounting]:
    """The question plus up to `query_variants` alternative phrasings."""
    fallback = heuristic_variants(question, context.query_variants)
    variants, accounting = fallback, Accounting()
    if _strong(context):
        prompt = MULTI_QUERY_PROMPT.format(question=question, n=context.query_variants)
        variants, accounting = _model_queries(question, MULTI_QUERY_SYSTEM, prompt, context, fallback)
    return [search_query(text, "variant") for text in variants[: context.query_variants]], accounting


def expansion_queries(question: str, context: Context) -> tuple[list[SearchQuery], Accounting]:
    """Keyword queries with synonyms and related terms (model), or the heuristic expansion."""
    fallback = [heuristic_expansion(question)]
    expansions, accounting = fallback, Accounting()
    if _strong(context):
        prompt = EXPAND_PROMPT.format(question=question, n=context.query_variants)
        expansions, accounting = _model_queries(question, EXPAND_SYSTEM, prompt, context, fallback)
    return [search_query(text, "expansion") for text in expansions[: context.query_variants]], accounting


def hyde_queries(question: str, context: Context) -> tuple[list[SearchQuery], Accounting]:
    """The question with a hypothetical answer passage as its dense text, else with the keyword expansion."""
    fallback = [search_query(question, "original"), search_query(heuristic_expansion(question), "expansion")]
    if not _strong(context):
        return fallback, {}
    resources = get_resources()
    messages = [SystemMessage(HYDE_SYSTEM), HumanMessage(HYDE_PROMPT.format(question=question))]
    reply, _error, accounting = text_call(
        resources.model("generate", context), messages, max_tokens=HYDE_MAX_TOKENS
    )
    passage = valid_passage(reply, question)
    if passage is None:
        return fallback, accounting
    return [search_query(question, "hyde", dense_text=passage)], accounting


def decomposition_queries(question: str, context: Context) -> tuple[list[SearchQuery], Accounting]:
    """The question plus 2..MAX_SUBQUESTIONS simpler questions (model, else the heuristic split)."""
    fallback = heuristic_subquestions(question, MAX_SUBQUESTIONS)
    subquestions, accounting = fallback, Accounting()
    if _strong(context):
        resources = get_resources()
        prompt = DECOMPOSE_PROMPT.format(question=question, max_n=MAX_SUBQUESTIONS)
        result, accounting = structured_call(
            resources.model("generate", context),
            SubQuestions,
            [SystemMessage(DECOMPOSE_SYSTEM), HumanMessage(prompt)],
            SubQuestions(questions=fallback),
            json_schema=resources.supports_json_schema("generate"),
            max_tokens=QUERIES_MAX_TOKENS,
        )
        written = valid_queries(result.value.questions, question, exclude=[question]) if result.ok else []
        subquestions = written if len(written) >= MIN_SUBQUESTIONS else fallback
    return [search_query(text, "subquestion") for text in subquestions[:MAX_SUBQUESTIONS]], accounting


def first_hop_queries(question: str, context: Context) -> list[SearchQuery]:
    """ITERATIVE's first hop: one question per compared item, or the inner question that finds the bridge."""
    subquestions = heuristic_subquestions(question, MAX_SUBQUESTIONS)
    if question_signals(question).comparison:
        return [search_query(text, "subquestion") for text in subquestions]
    return [search_query(text, "hop") for text in subquestions[:1]]


def build_queries(question: str, strategy: str, context: Context) -> tuple[list[SearchQuery], Accounting]:
    """The round's queries, the question first, without duplicates (case-insensitive)."""
    method = rewrite_method(strategy, context)
    original = search_query(question, "original")
    extra: list[SearchQuery] = []
    accounting: Accounting = {}
    if method == "hyde":
        hyde, accounting = hyde_queries(question, context)
        return unique_queries(hyde) or [original], accounting
    if method == "multi":
        extra, accounting = multi_queries(question, context)
    elif method == "advanced":
        # ADVANCED_QUERIES in all, the question first; each searches top_k / that many (nodes.retrieve).
        variants = ADVANCED_QUERIES - 1
        if variants > 0:
            extra, accounting = multi_queries(question, replace(context, query_variants=variants))
    elif method == "decompose":
        extra, accounting = decomposition_queries(question, context)
    elif method == "expand":
        extra, accounting = expansion_queries(question, context)
    elif method == "hop":
        extra = first_hop_queries(question, context)
    return unique_queries([original, *extra]) or [original], accounting


@timed("rewrite")
def rewrite(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Set the first round's `queries` (and record them in `queries_run`)."""
    question = state.get("standalone_question") or state.get("question") or ""
    queries, accounting = build_queries(question, state.get("strategy") or "DIRECT", run_context(runtime))
    update = {"queries": queries, "queries_run": [query["text"] for query in queries], "retrieval_rounds": 1}
    emit("query_rewritten", {"queries": update["queries_run"], "strategy": state.get("strategy"), "round": 1})
    return merge_updates(update, accounting) if accounting else update

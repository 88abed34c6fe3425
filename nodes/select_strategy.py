"""select_strategy: how much retrieval work a question deserves (adaptive RAG), as a pure function.

The rules, first match wins:
1. a fixed rewrite method (`context.rewrite` other than auto) decides (OVERRIDE_STRATEGIES);
2. no retrieval needed (greeting, arithmetic) -> DIRECT;
3. MULTI_HOP -> ITERATIVE, whatever the preference or complexity (one retrieval cannot bridge);
4. preference speed -> DIRECT;
5. SIMPLE_FACT, or complexity <= SIMPLE_MAX_COMPLEXITY -> DIRECT;
6. COMPARISON or AGGREGATION -> HYBRID (several queries cover several entities or items);
7. complexity >= HIGH_COMPLEXITY with preference accuracy -> HYDE;
8. COMPLEX_REASONING -> QUERY_DECOMPOSITION;
9. OPEN_ENDED -> HYDE under preference accuracy, else DIRECT;
10. anything else -> DIRECT.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import ValidationError

from nodes.instrumentation import timed
from query.classification import heuristic_analysis
from state.context import Context, run_context
from state.graph_state import State
from state.schemas import QueryAnalysis, Strategy

#: Complexity up to which a question is answered by one direct retrieval.
SIMPLE_MAX_COMPLEXITY = 3
#: Complexity from which an accuracy-minded run spends a HyDE generation.
HIGH_COMPLEXITY = 7
#: Strategy of each fixed rewrite method (`context.rewrite`); "auto" is absent on purpose.
OVERRIDE_STRATEGIES: dict[str, Strategy] = {
    "multi": "HYBRID",
    "hyde": "HYDE",
    "decompose": "QUERY_DECOMPOSITION",
    "expand": "DIRECT",
    "none": "DIRECT",
}


def choose_strategy(analysis: QueryAnalysis, context: Context) -> Strategy:
    """The retrieval strategy for an analysed question under a run's configuration (see the module doc).
    With `context.hyde` off, a rule that would choose HYDE chooses DIRECT (a fixed `rewrite=hyde` wins)."""
    if context.rewrite in OVERRIDE_STRATEGIES:
        return OVERRIDE_STRATEGIES[context.rewrite]
    strategy = _rule_strategy(analysis, context)
    return "DIRECT" if strategy == "HYDE" and not context.hyde else strategy


def _rule_strategy(analysis: QueryAnalysis, context: Context) -> Strategy:
    """Rules 2-10 of the module doc."""
    query_type = analysis.query_type
    accuracy = context.preference == "accuracy"
    if not analysis.needs_retrieval:
        return "DIRECT"
    if query_type == "MULTI_HOP":
        return "ITERATIVE"
    if context.preference == "speed":
        return "DIRECT"
    if query_type == "SIMPLE_FACT" or analysis.complexity <= SIMPLE_MAX_COMPLEXITY:
        return "DIRECT"
    if query_type in ("COMPARISON", "AGGREGATION"):
        return "HYBRID"
    if analysis.complexity >= HIGH_COMPLEXITY and accuracy:
        return "HYDE"
    if query_type == "COMPLEX_REASONING":
        return "QUERY_DECOMPOSITION"
    if query_type == "OPEN_ENDED":
        return "HYDE" if accuracy else "DIRECT"
    return "DIRECT"


def state_analysis(state: State) -> QueryAnalysis:
    """The analysis in state, or the heuristic one when it is missing or malformed."""
    try:
        return QueryAnalysis.model_validate(state.get("analysis") or {})
    except ValidationError:
        return heuristic_analysis(state.get("standalone_question") or state.get("question") or "")


@timed("select_strategy")
def select_strategy(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Set `strategy` from the analysis and the run's context."""
    return {"strategy": choose_strategy(state_analysis(state), run_context(runtime))}

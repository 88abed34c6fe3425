"""The notes assistant's retryStrategy: what a retrieval retry searches, from the plan (pure) through
reformulate's queries and depth to the retrieve tasks the router fans out and the k each one searches.

Why: "expand" must search the same query deeper (not a rewritten one), "rewrite" must search new queries at
the same depth, "both" does both in one round, and a planned ITERATIVE hop is no retry at all.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from graphs.routing import fan_out_queries
from nodes import retrieve as retrieve_module
from nodes.reformulate import reformulate
from nodes.retrieve import scoped_search
from nodes.retry_strategy import RetryPlan, plan_retry, search_k
from state.context import Context
from state.graph_state import State
from state.schemas import RetrievedDoc, SearchQuery
from tests.conftest import runtime
from tests.fakes import scripted

QUESTION = "When was the Eiffel Tower completed?"
#: The first round's query, with a dense text of its own (as HyDE writes): an expanding retry keeps both.
FIRST = SearchQuery(text=QUESTION, dense_text="The tower was completed in the late 1880s.", purpose="hyde")
POOR = RetrievedDoc(
    chunk_id="paris-1",
    text="Paris is the capital of France.",
    source="/corpus/paris.md",
    title="Paris",
    page=1,
    doc_id="paris",
    score=0.4,
    relevance=0.1,
    query=QUESTION,
    metadata={},
)


def first_round(**extra: Any) -> State:
    """The state after a first round that found nothing relevant."""
    return {
        "question": QUESTION,
        "standalone_question": QUESTION,
        "strategy": "DIRECT",
        "queries": [FIRST],
        "queries_run": [QUESTION],
        "documents": [POOR],
        "retrieval_rounds": 1,
        "retrieval_depth": 1,
        **extra,
    }


def retry(state: State, strategy: str, **context: Any) -> tuple[dict[str, Any], list[Any]]:
    """reformulate's update for `strategy`, and the retrieve tasks the router then sends."""
    update = reformulate(state, runtime(retry_strategy=strategy, top_k=5, **context))
    sends = fan_out_queries({**state, **update})
    assert all(send.node == "retrieve" for send in sends)
    return update, [send.arg for send in sends]


# --- the plan ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "depth", "expected"),
    [
        ("expand", 1, RetryPlan(same_queries=True, rewrite=False, depth=2)),
        ("expand", 2, RetryPlan(same_queries=True, rewrite=False, depth=4)),
        ("rewrite", 1, RetryPlan(same_queries=False, rewrite=True, depth=1)),
        ("both", 1, RetryPlan(same_queries=True, rewrite=True, depth=2)),
        # k already reaches candidate_k (5 x 20 = 100): expanding would search what was searched
        ("expand", 20, RetryPlan(same_queries=False, rewrite=True, depth=20)),
        ("both", 20, RetryPlan(same_queries=False, rewrite=True, depth=20)),
    ],
)
def test_the_plan_of_each_strategy(strategy: Any, depth: int, expected: RetryPlan) -> None:
    assert plan_retry(strategy, depth, factor=2, top_k=5, max_k=100) == expected


def test_plan_names_and_k() -> None:
    assert [plan_retry(s, 1, 2, 5, 100).name for s in ("expand", "rewrite", "both")] == [
        "expand",
        "rewrite",
        "both",
    ]
    assert plan_retry("expand", 20, 2, 5, 100).name == "rewrite"
    assert [search_k(5, depth, 100) for depth in (1, 2, 64)] == [5, 10, 100]
    assert search_k(50, 4, 20) == 50  # never below the run's own k


# --- reformulate and the router, per strategy -------------------------------------------------------------


def test_expand_searches_the_same_query_deeper_without_a_model_call(install: Any) -> None:
    model = scripted()
    install(model, strength="strong")
    update, tasks = retry(first_round(), "expand")
    assert [task["query"] for task in tasks] == [FIRST] and {task["depth"] for task in tasks} == {2}
    assert update["retrieval_depth"] == 2 and update["retrieval_rounds"] == 1
    assert model.received == []  # no query to write
    _, again = retry(first_round(retrieval_depth=2, retrieval_rounds=2), "expand")
    assert {task["depth"] for task in again} == {4}


def test_rewrite_searches_new_queries_at_the_same_depth(install: Any) -> None:
    install(scripted(), strength="weak")
    update, tasks = retry(first_round(), "rewrite")
    texts = [task["query"]["text"] for task in tasks]
    assert (
        texts and QUESTION not in texts and all(task["query"]["purpose"] == "reformulation" for task in tasks)
    )
    assert {task["depth"] for task in tasks} == {1} and update["retrieval_depth"] == 1


def test_both_searches_the_same_query_and_new_ones_deeper(install: Any) -> None:
    install(scripted(), strength="weak")
    update, tasks = retry(first_round(), "both")
    assert tasks[0]["query"] == FIRST and len(tasks) >= 2
    assert all(task["query"]["text"] != QUESTION for task in tasks[1:])
    assert {task["depth"] for task in tasks} == {2} and update["retrieval_depth"] == 2


def test_an_iterative_hop_is_not_a_retry(install: Any) -> None:
    install(scripted(), strength="weak")
    question = "Who directed the film whose star was born in Lyon?"
    state = first_round(strategy="ITERATIVE", question=question, standalone_question=question)
    update, tasks = retry(state, "expand")
    assert all(task["query"]["purpose"] == "hop" for task in tasks) and {task["depth"] for task in tasks} == {
        1
    }
    assert update["hops"] == 1 and update["retrieval_depth"] == 1


def test_a_turn_without_depth_fans_out_at_depth_1() -> None:
    tasks = [send.arg for send in fan_out_queries({"question": QUESTION, "queries": [FIRST]})]
    assert [task["depth"] for task in tasks] == [1]


# --- the k a deeper task searches -------------------------------------------------------------------------


class RecordingSearcher:
    """What scoped_search needs of a Searcher: embed_query, and search (recording its k)."""

    def __init__(self) -> None:
        self.ks: list[int] = []

    def embed_query(self, text: str) -> list[float]:
        return [0.0]

    def search(self, text: str, *, k: int, **kwargs: Any) -> SimpleNamespace:
        self.ks.append(k)
        return SimpleNamespace(hits=[])


@pytest.mark.parametrize(("depth", "k"), [(1, 5), (2, 10), (4, 20), (64, 30)])
def test_a_deeper_task_searches_k_times_its_depth_up_to_candidate_k(
    depth: int, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retrieve_module, "CANDIDATE_K", 30)
    searcher = RecordingSearcher()
    scoped_search(
        searcher,  # type: ignore[arg-type]
        QUESTION,
        QUESTION,
        context=Context(top_k=5),
        tenant="default",
        filters=None,
        conversation_id="",
        depth=depth,
    )
    assert searcher.ks == [k]

"""Every route of the compiled agentic graph, run end to end over a small corpus with the fake embedding model
and scripted chat models (tests.fakes.TaskChatModel): the strategies (DIRECT, HYDE, QUERY_DECOMPOSITION,
ITERATIVE, HYBRID), the no-retrieval and not-found paths, both Self-RAG loops up to their bounds, garbage from
every model-calling node, bad input, and tenant isolation at graph level.

Why through the compiled graph: the nodes are tested one by one elsewhere; what only a run shows is that the
routers, the fan-out and the reducers put them together as the design says (which node runs after which, how
many retrievals a round fans out to, that counters bound the loops, that the cited answer is the best one).
The corpus is tiny and the fakes are instant, so the whole module runs in seconds.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from graphs.rag import build_graph
from nodes.resources import Resources, Strength, use_resources
from nodes.start_turn import InvalidQuestionError
from prompts.answer import MODEL_FAILED_EN, REVISION_NOTE_EN
from prompts.not_found import NOT_FOUND_ANSWER_EN
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.conftest import isolated_settings, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, garbage_model
from tests.helpers.calibrators import scripted

CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. "
    "Jupiter has 95 known moons; Ganymede is its largest moon.",
    "mars.md": "# Mars\n\nMars is the fourth planet from the Sun. "
    "Olympus Mons on Mars is the tallest volcano of the Solar System, about 22 kilometres high.",
    "everest.md": "# Mount Everest\n\nMount Everest is the tallest mountain on Earth, 8849 metres above sea "
    "level, in the Himalaya.",
    "fizzwheel.md": "# Fizzwheel\n\nThe Fizzwheel is a clockwork toy designed by Orla Brennick in 1911.",
    "brennick.md": "# Orla Brennick\n\nOrla Brennick was born in Vantaport, a harbour town famous for kelp.",
    "tea.md": "# Oolong tea\n\nOolong is a partly oxidised tea from Fujian; it is brewed at 90 degrees for "
    "three minutes.",
}

LARGEST = "What is the largest planet in the Solar System?"
JUPITER_ANSWER = "Jupiter is the largest planet in the Solar System [1]."
BRIDGE = "Where was the inventor who designed the Fizzwheel born?"
COMPARISON = "Which is taller, Olympus Mons or Mount Everest?"
GREETING = "Hello!"

ANALYSIS_SIMPLE = json.dumps({"query_type": "SIMPLE_FACT", "complexity": 2, "needs_retrieval": True})
ANALYSIS_COMPLEX = json.dumps(
    {"query_type": "COMPLEX_REASONING", "complexity": 8, "needs_retrieval": True, "wants_details": False}
)
ALL_RELEVANT = json.dumps({"relevant": [1, 2, 3, 4, 5]})
GOOD_GRADE = json.dumps(
    {
        "grounded": True,
        "answers_question": True,
        "relevance": 0.9,
        "accuracy": 0.9,
        "completeness": 0.9,
        "clarity": 0.9,
    }
)
#: The nodes of a DIRECT run that retrieves once and accepts its first answer, in order.
DIRECT_PATH = [
    "start_turn",
    "contextualize",
    "cache_lookup",
    "recall_memories",
    "analyze",
    "select_strategy",
    "rewrite",
    "retrieve",
    "grade_retrieval",
    "compress_evidence",
    "generate",
    "grade_answer",
    "cite",
    "record_turn",
]


def grade(score: float, *, grounded: bool = True) -> str:
    """An LLM answer grade with every dimension at `score`."""
    dims = dict.fromkeys(("relevance", "accuracy", "completeness", "clarity"), score)
    return json.dumps({"grounded": grounded, "answers_question": True, **dims})


# --- running the graph -----------------------------------------------------------------------------------


@dataclass
class Run:
    """One graph run seen through `stream_mode="updates"`: each node's update in order, and the output."""

    updates: list[tuple[str, dict[str, Any]]]
    output: dict[str, Any]

    @property
    def nodes(self) -> list[str]:
        """Node names in the order they ran (a fanned-out node once per task)."""
        return [name for name, _ in self.updates]

    def of(self, node: str) -> list[dict[str, Any]]:
        """The updates of one node, in order."""
        return [update for name, update in self.updates if name == node]

    def query_rounds(self) -> list[list[str]]:
        """The query texts of each retrieval round (rewrite's, then each reformulate's)."""
        return [
            [query["text"] for query in update["queries"]]
            for name, update in self.updates
            if name in ("rewrite", "reformulate")
        ]

    def retrieve_rounds(self) -> list[list[dict[str, Any]]]:
        """The `retrieve` updates of each round (a round is a run of consecutive retrieve tasks)."""
        rounds: list[list[dict[str, Any]]] = []
        previous = ""
        for name, update in self.updates:
            if name == "retrieve":
                if previous != "retrieve":
                    rounds.append([])
                rounds[-1].append(update)
            previous = name
        return rounds

    def retrieved(self) -> list[dict[str, Any]]:
        """Every passage any retrieve task returned."""
        return [doc for update in self.of("retrieve") for doc in update["documents"]]

    def retrieved_ids(self) -> set[str]:
        """Chunk ids of every passage retrieved in this run."""
        return {doc["chunk_id"] for doc in self.retrieved()}


def run_graph(
    graph: CompiledStateGraph, inputs: dict[str, Any], context: Context, config: dict[str, Any] | None = None
) -> Run:
    """Stream one run, keeping every node update and the final output. The routes are what these tests check,
    so the model's reply is kept as it is (answerer="model"); the short-answer-first shape of answers is
    tested in test_answer_span and test_nodes_answer."""
    context = dataclasses.replace(context, answerer="model")
    updates: list[tuple[str, dict[str, Any]]] = []
    output: dict[str, Any] = {}
    for mode, payload in graph.stream(
        inputs, config=config, context=context, stream_mode=["updates", "values"]
    ):
        if mode == "updates":
            for name, update in payload.items():
                updates.append((name, update or {}))
        else:
            output = payload
    return Run(updates, output)


def file_name(doc: dict[str, Any]) -> str:
    """The file a passage (or citation) comes from."""
    return Path(doc["source"]).name


def generate_prompt(model: TaskChatModel, index: int = 0) -> str:
    """The user message of the `index`-th answer-writing call (where the numbered sources are)."""
    return str(model.prompts("generate")[index][-1].content)


def assert_cited_from_retrieved(run: Run) -> None:
    """Every citation points at a passage this run retrieved and at a source of the output."""
    citations = run.output["citations"]
    assert citations, "expected a cited answer"
    source_ids = {source["chunk_id"] for source in run.output["sources"]}
    for citation in citations:
        assert citation["chunk_id"] in run.retrieved_ids()
        assert citation["chunk_id"] in source_ids


# --- fixtures --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the corpus files and the knowledge base's data."""
    root = tmp_path_factory.mktemp("graph-routes")
    write_corpus(root / "corpus", CORPUS)
    return root


@pytest.fixture(scope="module")
def corpus_kb(corpus_root: Path) -> Iterator[KnowledgeBase]:
    """The corpus indexed once for the module with the fake embeddings (tests only read it)."""
    kb = KnowledgeBase(isolated_settings(corpus_root), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    summary = ingest_paths(kb, [corpus_root / "corpus"])
    assert summary.count("indexed") == len(CORPUS) and summary.count("failed") == 0
    yield kb
    kb.close()


@pytest.fixture
def graph() -> CompiledStateGraph:
    """The agentic graph without a checkpointer (one turn per run)."""
    return build_graph()


@pytest.fixture
def install(corpus_kb: KnowledgeBase) -> Iterator[Any]:
    """Install a model for both roles over a knowledge base (the corpus by default)."""
    stack: list[Any] = []

    def installer(
        model: TaskChatModel,
        strength: Strength | dict[str, Strength] = "weak",
        kb: KnowledgeBase | None = None,
    ) -> TaskChatModel:
        strengths = strength if isinstance(strength, dict) else {"generate": strength, "grade": strength}
        base = kb or corpus_kb
        resources = Resources(
            base.settings, knowledge_base=base, generator=model, grader=model, strengths=strengths
        )
        block = use_resources(resources)
        block.__enter__()
        stack.append(block)
        return model

    yield installer
    for block in reversed(stack):
        block.__exit__(None, None, None)


# --- strategies ------------------------------------------------------------------------------------------


def test_direct_route_retrieves_once_and_cites_the_retrieved_passage(graph: Any, install: Any) -> None:
    model = install(TaskChatModel(replies={"generate": JUPITER_ANSWER}))
    run = run_graph(graph, {"question": LARGEST}, Context(top_k=2))
    out = run.output

    assert run.nodes == DIRECT_PATH
    assert out["strategy"] == "DIRECT" and out["analysis"]["query_type"] == "SIMPLE_FACT"
    assert (out["retrieval_rounds"], out["generation_rounds"], out["llm_calls"]) == (1, 1, 1)
    assert model.tasks() == ["generate"]  # weak model: heuristic analysis, score graders
    assert run.query_rounds() == [[LARGEST]]
    assert out["not_found"] is False and out["answer"] == JUPITER_ANSWER
    assert_cited_from_retrieved(run)
    assert [file_name(citation) for citation in out["citations"]] == ["jupiter.md"]
    assert out["citations"][0]["inferred"] is False  # the model's own [1], not one attached afterwards
    assert {"retrieve", "generate", "grade_answer"} <= set(out["timings_ms"])
    assert [message.type for message in out["messages"]] == ["human", "ai"]


HYDE_PASSAGE = "Jupiter, a gas giant, is the largest planet of the Solar System and has dozens of moons."


@pytest.mark.parametrize(
    ("context", "analysis"),
    [
        ({"rewrite": "hyde"}, ANALYSIS_SIMPLE),
        ({"preference": "accuracy"}, ANALYSIS_COMPLEX),
    ],
    ids=["rewrite-hyde", "accuracy-and-complex"],
)
def test_hyde_route_searches_with_a_hypothetical_passage(
    graph: Any, install: Any, context: dict[str, Any], analysis: str
) -> None:
    replies = {
        "analyze": analysis,
        "hyde": HYDE_PASSAGE,
        "grade_retrieval": ALL_RELEVANT,
        "generate": JUPITER_ANSWER,
        "grade_answer": GOOD_GRADE,
    }
    model = install(TaskChatModel(replies=replies), "strong")
    run = run_graph(graph, {"question": LARGEST}, Context(top_k=2, **context))
    out = run.output

    assert out["strategy"] == "HYDE"
    rewrite = run.of("rewrite")[0]
    assert rewrite["queries"] == [{"text": LARGEST, "dense_text": HYDE_PASSAGE, "purpose": "hyde"}]
    assert len(run.of("retrieve")) == 1
    assert model.tasks() == ["analyze", "hyde", "grade_retrieval", "generate", "grade_answer"]
    assert out["analysis"]["source"] == "llm"
    assert out["llm_calls"] == 5
    assert out["retrieval_rounds"] == 1 and out["generation_rounds"] == 1
    assert out["answer"] == JUPITER_ANSWER and out["answer_grade"]["grader"] == "llm"
    assert_cited_from_retrieved(run)


SUBQUESTIONS = ["How many moons does Jupiter have?", "Which volcano on Mars is the tallest?"]
DECOMPOSED_ANSWER = "Jupiter has 95 known moons [1]. Olympus Mons on Mars is the tallest volcano [2]."


def test_decomposition_fans_out_one_retrieve_per_query(graph: Any, install: Any) -> None:
    question = "Why does Jupiter have so many moons while Mars has the tallest volcano?"
    model = install(
        TaskChatModel(
            replies={
                "analyze": json.dumps({"query_type": "COMPLEX_REASONING", "complexity": 6}),
                "decompose": json.dumps({"questions": SUBQUESTIONS}),
                "grade_retrieval": ALL_RELEVANT,
                "generate": DECOMPOSED_ANSWER,
                "grade_answer": GOOD_GRADE,
            }
        ),
        "strong",
    )
    run = run_graph(graph, {"question": question}, Context(top_k=2))
    out = run.output

    assert out["strategy"] == "QUERY_DECOMPOSITION"
    assert run.query_rounds() == [[question, *SUBQUESTIONS]]
    # One retrieve task per query, all in the superstep before the first grading.
    first_grading = run.nodes.index("grade_retrieval")
    assert run.nodes[run.nodes.index("rewrite") + 1 : first_grading] == ["retrieve"] * 3
    assert sorted(update["documents"][0]["query"] for update in run.of("retrieve")) == sorted(
        [question, *SUBQUESTIONS]
    )
    # The fanned-out results were merged: the answer prompt shows passages found by different queries.
    prompt = generate_prompt(model)
    assert "jupiter.md" in prompt and "mars.md" in prompt
    assert {file_name(citation) for citation in out["citations"]} == {"jupiter.md", "mars.md"}
    assert_cited_from_retrieved(run)
    assert out["retrieval_rounds"] == 1 and out["generation_rounds"] == 1


BRIDGE_ANSWER = "The Fizzwheel was designed by Orla Brennick [1], who was born in Vantaport [2]."


def test_iterative_route_makes_a_second_hop_with_the_bridge_entity(graph: Any, install: Any) -> None:
    model = install(TaskChatModel(replies={"generate": BRIDGE_ANSWER}))
    run = run_graph(graph, {"question": BRIDGE}, Context(top_k=1, iterative_hops=2))
    out = run.output

    assert out["strategy"] == "ITERATIVE" and out["analysis"]["query_type"] == "MULTI_HOP"
    before_answer = run.nodes[: run.nodes.index("generate")]
    assert before_answer.count("grade_retrieval") == 2 and before_answer.count("reformulate") == 1
    hop1, hop2 = run.retrieve_rounds()[:2]
    # Hop 1 can only find the toy (the question never names its inventor) ...
    assert {file_name(doc) for update in hop1 for doc in update["documents"]} == {"fizzwheel.md"}
    # ... hop 2 searches for the inventor it named, and finds where she was born.
    second_queries = run.query_rounds()[1]
    assert any("Orla Brennick" in text for text in second_queries)
    assert "brennick.md" in {file_name(doc) for update in hop2 for doc in update["documents"]}
    assert out["retrieval_rounds"] >= 2 and out["generation_rounds"] == 1
    prompt = generate_prompt(model)
    assert "fizzwheel.md" in prompt and "Vantaport" in prompt
    assert out["answer"] == BRIDGE_ANSWER
    assert {file_name(citation) for citation in out["citations"]} == {"fizzwheel.md", "brennick.md"}
    assert_cited_from_retrieved(run)


COMPARISON_ANSWER = (
    "Olympus Mons on Mars is about 22 kilometres high [2], while Mount Everest is 8849 metres high [1]."
)


def test_hybrid_route_for_a_comparison_fans_out_variants(graph: Any, install: Any) -> None:
    model = install(TaskChatModel(replies={"generate": COMPARISON_ANSWER}))
    # Each side's passage shares only its own names with the question, so the score grader rates both about
    # 0.3-0.4: a threshold of 0.3 lets both count as relevant and the answer cite both.
    run = run_graph(graph, {"question": COMPARISON}, Context(top_k=1, relevance_threshold=0.3))
    out = run.output

    assert out["analysis"]["query_type"] == "COMPARISON" and out["strategy"] == "HYBRID"
    (queries,) = run.query_rounds()
    assert queries[0] == COMPARISON and len(queries) > 1
    assert [query["purpose"] for query in run.of("rewrite")[0]["queries"][1:]] == ["variant"] * (
        len(queries) - 1
    )
    assert len(run.retrieve_rounds()[0]) == len(queries)
    # With one passage per query, only the variants can bring both sides of the comparison.
    assert {"mars.md", "everest.md"} <= {file_name(doc) for doc in run.retrieved()}
    prompt = generate_prompt(model)
    assert "mars.md" in prompt and "everest.md" in prompt
    assert out["generation_rounds"] == 1 and out["retrieval_rounds"] == 1
    assert {file_name(citation) for citation in out["citations"]} == {"mars.md", "everest.md"}
    assert_cited_from_retrieved(run)


MULTI_QUERIES = ["Olympus Mons volcano height kilometres", "Mount Everest height metres"]


def test_hybrid_route_with_model_written_queries(graph: Any, install: Any) -> None:
    model = install(
        TaskChatModel(
            replies={
                "multi": json.dumps({"queries": MULTI_QUERIES}),
                "grade_retrieval": ALL_RELEVANT,
                "generate": COMPARISON_ANSWER,
                "grade_answer": GOOD_GRADE,
            }
        ),
        "strong",
    )
    run = run_graph(graph, {"question": COMPARISON}, Context(top_k=1, rewrite="multi", analyzer="heuristic"))
    out = run.output

    assert out["strategy"] == "HYBRID"
    assert run.query_rounds() == [[COMPARISON, *MULTI_QUERIES]]
    assert len(run.retrieve_rounds()[0]) == 3
    assert model.tasks() == ["multi", "grade_retrieval", "generate", "grade_answer"]
    assert out["llm_calls"] == 4
    assert_cited_from_retrieved(run)


def test_a_second_turn_on_a_thread_starts_with_fresh_counters(install: Any) -> None:
    """The checkpointer keeps the whole state between turns; only the conversation may carry over."""
    graph = build_graph(InMemorySaver())
    model = install(TaskChatModel(replies={"generate": [BRIDGE_ANSWER, JUPITER_ANSWER]}))
    config = {"configurable": {"thread_id": "t1"}}
    first = run_graph(graph, {"question": BRIDGE}, Context(top_k=1), config)
    second = run_graph(graph, {"question": LARGEST}, Context(top_k=2), config)

    assert first.output["retrieval_rounds"] >= 2 and first.output["strategy"] == "ITERATIVE"
    out = second.output
    assert out["strategy"] == "DIRECT"
    assert (out["retrieval_rounds"], out["generation_rounds"], out["llm_calls"]) == (1, 1, 1)
    assert out["answer"] == JUPITER_ANSWER and len(model.prompts("generate")) == 2
    # Only this turn's passages are there to cite (none of the Fizzwheel turn's).
    assert {file_name(source) for source in out["sources"]} == {"jupiter.md"}
    assert "fizzwheel.md" not in generate_prompt(model, 1)
    assert [message.content for message in out["messages"]] == [
        BRIDGE,
        BRIDGE_ANSWER,
        LARGEST,
        JUPITER_ANSWER,
    ]


# --- no retrieval, not found -----------------------------------------------------------------------------


def test_greeting_is_answered_without_retrieval(graph: Any, install: Any) -> None:
    reply = "Hello! Ask me anything about your documents."
    model = install(TaskChatModel(replies={"chat": reply}))
    run = run_graph(graph, {"question": GREETING}, Context())
    out = run.output

    assert run.nodes == [
        "start_turn",
        "contextualize",
        "cache_lookup",
        "recall_memories",
        "analyze",
        "generate",
        "grade_answer",
        "cite",
        "record_turn",
    ]
    assert out["analysis"]["needs_retrieval"] is False
    assert model.tasks() == ["chat"]
    assert out["answer"] == reply and out["citations"] == [] and out["sources"] == []
    assert (out["retrieval_rounds"], out["generation_rounds"], out["llm_calls"]) == (0, 1, 1)
    assert out["answer_grade"]["grader"] == "skipped" and out["not_found"] is False


def test_empty_knowledge_base_gives_the_honest_not_found_answer(
    graph: Any, install: Any, tmp_path: Path
) -> None:
    empty = KnowledgeBase(isolated_settings(tmp_path), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    try:
        model = install(TaskChatModel(replies={"generate": JUPITER_ANSWER}), kb=empty)
        run = run_graph(graph, {"question": LARGEST}, Context())
    finally:
        empty.close()
    out = run.output

    assert run.nodes[-4:] == ["retrieve", "grade_retrieval", "not_found", "record_turn"]
    assert "generate" not in run.nodes and model.calls == []
    assert out["not_found"] is True and out["answer"] == NOT_FOUND_ANSWER_EN
    assert out["citations"] == [] and out["sources"] == []
    assert out["llm_calls"] == 0 and out["generation_rounds"] == 0 and out["retrieval_rounds"] == 1
    assert out["messages"][-1].content == NOT_FOUND_ANSWER_EN


@pytest.mark.parametrize("where", ["input", "context"])
def test_a_tenant_without_documents_gets_not_found(graph: Any, install: Any, where: str) -> None:
    model = install(TaskChatModel(replies={"generate": JUPITER_ANSWER}))
    inputs: dict[str, Any] = {"question": LARGEST}
    context = Context(tenant="nobody")
    if where == "input":  # the input may name the tenant too, when it agrees with the context
        inputs["tenant"] = "nobody"
    run = run_graph(graph, inputs, context)

    assert run.nodes[-2:] == ["not_found", "record_turn"] and run.retrieved() == []
    assert run.output["not_found"] is True and run.output["answer"] == NOT_FOUND_ANSWER_EN
    assert model.calls == []


# --- Self-RAG loops --------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_iterations", [1, 2, 3])
def test_poor_retrieval_is_reformulated_within_the_round_budget(
    graph: Any, install: Any, max_iterations: int
) -> None:
    """No passage can reach relevance 1.0, so every round is poor: the loop must stop at the budget."""
    model = install(TaskChatModel(replies={"generate": JUPITER_ANSWER}))
    context = Context(top_k=2, relevance_threshold=1.0, max_iterations=max_iterations)
    run = run_graph(graph, {"question": LARGEST}, context)
    out = run.output

    before_answer = run.nodes[: run.nodes.index("generate")]
    assert before_answer.count("grade_retrieval") == max_iterations
    assert before_answer.count("reformulate") == max_iterations - 1
    decisions = [update["retrieval_decision"] for update in run.of("grade_retrieval")]
    assert decisions[: max_iterations - 1] == ["reformulate"] * (max_iterations - 1)
    assert decisions[max_iterations - 1] == "generate"  # budget spent: answer from the best there is
    assert out["retrieval_rounds"] == max_iterations
    # Each round searched something new.
    texts = [text.casefold() for round_ in run.query_rounds() for text in round_]
    assert len(texts) == len(set(texts)) and len(run.query_rounds()) == max_iterations
    assert len(run.retrieve_rounds()) == max_iterations
    assert out["answer"] == JUPITER_ANSWER and model.tasks().count("generate") == out["generation_rounds"]


def test_question_absent_from_the_corpus_is_reformulated(graph: Any, install: Any) -> None:
    """Nothing mentions glorbium: the first round is poor, so reformulate searches other words."""
    install(TaskChatModel(replies={"generate": JUPITER_ANSWER}))
    run = run_graph(graph, {"question": "What is the boiling point of glorbium?"}, Context(top_k=2))

    first = run.of("grade_retrieval")[0]
    assert first["retrieval_decision"] == "reformulate" and "glorbium" in first["missing_terms"]
    assert run.nodes[run.nodes.index("grade_retrieval") + 1] == "reformulate"
    assert 2 <= run.output["retrieval_rounds"] <= 3


def test_ungrounded_answer_sends_the_loop_back_to_retrieval(
    graph: Any, install: Any, calibrator: Any
) -> None:
    calibrator(scripted(0.5, 0.9))  # the judgement: tentative, then confident
    model = install(
        TaskChatModel(
            replies={
                "grade_retrieval": ALL_RELEVANT,
                "generate": ["Jupiter is made of cheese [1].", JUPITER_ANSWER],
                "grade_answer": [grade(0.4, grounded=False), GOOD_GRADE],
            }
        )
    )
    run = run_graph(graph, {"question": LARGEST}, Context(top_k=2, grader="llm", analyzer="heuristic"))
    out = run.output

    assert [update["next_action"] for update in run.of("grade_answer")] == ["retrieve", "accept"]
    first_grade = run.nodes.index("grade_answer")
    assert run.nodes[first_grade + 1 : first_grade + 3] == ["reformulate", "retrieve"]
    assert out["retrieval_rounds"] == 2 and out["generation_rounds"] == 2
    assert REVISION_NOTE_EN in str(model.prompts("generate")[1][0].content)
    assert REVISION_NOTE_EN not in str(model.prompts("generate")[0][0].content)
    assert out["answer"] == JUPITER_ANSWER
    assert_cited_from_retrieved(run)


#: Each draft with its grade and its judged probability (all below the confident threshold, 0.7).
DRAFTS = {
    "Jupiter has many moons [1].": 0.5,
    "Jupiter is the largest planet in the Solar System [1].": 0.65,
    "Jupiter is big [1].": 0.3,
}


def grade_by_draft(messages: Sequence[BaseMessage]) -> str:
    """The answer grader's reply for whichever scripted draft its prompt shows (all below the threshold)."""
    prompt = str(messages[-1].content)
    answer = prompt.split("Answer:\n", 1)[1]
    return next(grade(score) for draft, score in DRAFTS.items() if answer.startswith(draft))


def test_answer_loop_stops_at_the_bound_and_cites_the_best_draft(
    graph: Any, install: Any, calibrator: Any
) -> None:
    """No draft is confident: the loop gives up at its bound, and the answer is the most probable draft's,
    shown as tentative (the closest sentence of its sources)."""
    calibrator(scripted(*DRAFTS.values()))
    model = install(
        TaskChatModel(
            replies={
                "grade_retrieval": ALL_RELEVANT,
                "generate": list(DRAFTS),
                "grade_answer": grade_by_draft,
            }
        )
    )
    context = Context(top_k=2, grader="llm", analyzer="heuristic", max_iterations=3)
    run = run_graph(graph, {"question": LARGEST}, context)
    out = run.output

    assert [update["next_action"] for update in run.of("grade_answer")] == [
        "regenerate",
        "regenerate",
        "give_up",
    ]
    assert run.nodes.count("generate") == 3 and run.nodes[-3:] == ["grade_answer", "cite", "record_turn"]
    assert out["generation_rounds"] == 3 and out["retrieval_rounds"] == 1
    assert model.tasks().count("generate") == 3
    best = max(DRAFTS, key=lambda draft: DRAFTS[draft])
    assert best != list(DRAFTS)[-1]  # the scripted best is not the last attempt
    assert out["answer_record"]["probability"] == DRAFTS[best] and out["band"] == "tentative"
    assert out["answer_record"]["short_answer"] == "Jupiter is the largest planet in the Solar System"
    assert out["answer"] == (
        "Not sure \u2014 the closest the documents come is: "
        "Jupiter is the largest planet in the Solar System. [1]"
    )
    assert out["messages"][-1].content == out["answer"]
    assert out["answer_grade"]["score"] == DRAFTS["Jupiter is big [1]."]  # the grade shown is the last one
    assert_cited_from_retrieved(run)


# --- garbage from every model-calling node ---------------------------------------------------------------

HISTORY: list[BaseMessage] = [
    HumanMessage(LARGEST),
    AIMessage(JUPITER_ANSWER),
    HumanMessage("How many moons does it have?"),
]
REWRITE_TASKS = {"multi": "multi", "decompose": "decompose", "hyde": "hyde"}


@pytest.mark.parametrize("method", sorted(REWRITE_TASKS))
def test_garbage_from_every_model_call_still_ends_with_an_answer(
    graph: Any, install: Any, method: str
) -> None:
    model = install(garbage_model(), "strong")
    context = Context(
        top_k=2,
        analyzer="llm",
        grader="llm",
        rewrite=method,  # type: ignore[arg-type]
        relevance_threshold=1.0,  # poor grades, so reformulate asks the model too
        max_iterations=2,
    )
    run = run_graph(graph, {"messages": HISTORY}, context)
    out = run.output

    called = set(model.tasks())
    expected = {"contextualize", "analyze", REWRITE_TASKS[method], "grade_retrieval", "reformulate"}
    assert expected | {"generate", "grade_answer"} <= called
    # Each node fell back to its documented default.
    assert out["standalone_question"].startswith("How many moons does it have?")
    assert "Solar System" in out["standalone_question"]  # heuristic: the previous subject carried over
    assert out["analysis"]["source"] == "heuristic"
    assert out["prompt_info"]["generation_fallback"] == "unusable model output"
    assert out["answer_grade"]["grader"] == "score"
    assert out["answer"].strip() and "%%%" not in out["answer"]
    assert out["answer"].rstrip().endswith("[1]")  # the extractive fallback cites its passage
    assert_cited_from_retrieved(run)
    assert out["retrieval_rounds"] <= 2 and out["generation_rounds"] <= 2
    assert [message.type for message in out["messages"]] == ["human", "ai", "human", "ai"]


def test_garbage_on_the_no_retrieval_path_gives_the_apology(graph: Any, install: Any) -> None:
    install(garbage_model(), "strong")
    run = run_graph(graph, {"question": GREETING}, Context(analyzer="heuristic"))

    assert "retrieve" not in run.nodes
    assert run.output["answer"] == MODEL_FAILED_EN


# --- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "context", "message"),
    [
        ({"question": ""}, {}, "empty question"),
        ({"question": "   "}, {}, "empty question"),
        ({"question": "x" * 81}, {"max_query_chars": 80}, "question too long: 81 characters > 80"),
        ({"question": LARGEST, "filters": {"$bogus": 1}}, {}, "invalid filters"),
        ({"question": LARGEST, "filters": {"page": {"$near": 3}}}, {}, "invalid filters"),
    ],
    ids=["empty", "blank", "too-long", "unknown-operator", "unknown-comparison"],
)
def test_bad_input_is_refused_before_any_work(
    graph: Any, install: Any, inputs: dict[str, Any], context: dict[str, Any], message: str
) -> None:
    model = install(TaskChatModel(replies={"generate": JUPITER_ANSWER}))
    with pytest.raises(InvalidQuestionError, match=message) as raised:
        graph.invoke(inputs, context=Context(**context))
    assert isinstance(raised.value, ValueError)
    assert model.calls == []


def test_a_long_question_within_the_limit_is_accepted(graph: Any, install: Any) -> None:
    install(TaskChatModel(replies={"generate": JUPITER_ANSWER}))
    question = LARGEST + " " * 10 + "Please."
    context = Context(max_query_chars=len(question), answerer="model")
    out = graph.invoke({"question": question}, context=context)
    assert out["answer"] == JUPITER_ANSWER


# --- tenant isolation ------------------------------------------------------------------------------------

SECRET = "zanzibarite"


def test_tenant_b_never_gets_tenant_a_passages(
    graph: Any, install: Any, tmp_path: Path, make_kb: Any
) -> None:
    corpus_a = tmp_path / "tenant-a"
    corpus_b = tmp_path / "tenant-b"
    write_corpus(corpus_a, {"plans.md": f"# Plans\n\nThe {SECRET} launch is planned at the harbour."})
    write_corpus(
        corpus_b,
        {
            "diary.md": "# Diary\n\nA fossil was found by the harbour.",
            "notes.md": "# Notes\n\nThe harbour launch was cancelled.",
        },
    )
    kb = make_kb(isolated_settings(tmp_path))
    assert ingest_paths(kb, [corpus_a], tenant="A").count("indexed") == 1
    assert ingest_paths(kb, [corpus_b], tenant="B").count("indexed") == 2
    question = f"When is the {SECRET} launch at the harbour?"
    install(TaskChatModel(replies={"generate": "The launch is at the harbour [1]."}), kb=kb)

    control = run_graph(graph, {"question": question, "tenant": "A"}, Context(top_k=3, tenant="A"))
    a_ids = control.retrieved_ids()
    assert a_ids and {doc["source"] for doc in control.retrieved()} == {"plans.md"}

    # The context is the one source of the tenant: an input naming another tenant is refused (no retrieval).
    with pytest.raises(InvalidQuestionError, match="context"):
        run_graph(graph, {"question": question, "tenant": "A"}, Context(top_k=3, tenant="B"))
    for inputs, context in [
        ({"question": question, "tenant": "B"}, Context(top_k=3, tenant="B")),
        ({"question": question}, Context(top_k=3, tenant="B")),
    ]:
        run = run_graph(graph, inputs, context)
        assert run.retrieved(), "tenant B has documents about the harbour"
        assert not run.retrieved_ids() & a_ids
        assert {doc["source"] for doc in run.retrieved()} <= {"diary.md", "notes.md"}
        assert not {source["chunk_id"] for source in run.output["sources"]} & a_ids
        assert SECRET not in json.dumps([doc["text"] for doc in run.retrieved()])

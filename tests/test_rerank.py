"""LLM rerank (retrieval/rerank.py) and the answer modes' retrieval (the seed API's modes): what each decides,
with fake models and no server.

Why: a rerank must cost exactly one model call, read a small model's near-miss replies, and never make a
search worse than fusion when the reply is garbage or the call fails; the modes must change retrieval (k per
query, fusion weights, queries), and the HyDE and Self-RAG switches must hold for every strategy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from config.settings import Settings, load_settings
from core.types import SearchHit
from evals import retrieval as retrieval_eval
from nodes.grade_answer import grade_answer
from nodes.resources import Resources, use_resources
from nodes.retrieve import mode_retrieval
from nodes.rewrite import build_queries
from nodes.select_strategy import choose_strategy
from prompts.rerank import RERANK_SYSTEM
from retrieval.knowledge_base import KnowledgeBase
from retrieval.rerank import parse_scores, rerank
from state.context import Context
from state.schemas import QueryAnalysis
from tests.conftest import runtime
from tests.fakes import BrokenChatModel, TaskChatModel, scripted
from tests.helpers.calibrators import constant

QUESTION = "What is the largest planet in the Solar System?"


def hits(count: int) -> list[SearchHit]:
    """Fused candidates c1..cN, best first."""
    return [
        SearchHit(f"c{n}", f"passage number {n}", {"title": f"T{n}"}, score=1.0 / n)
        for n in range(1, count + 1)
    ]


# --- parsing ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("[1] 3\n[2] 9\n[3] 5", {1: 3.0, 2: 9.0, 3: 5.0}),
        ("1: 3\n2 - 9.5\nPassage 3 = 5", {1: 3.0, 2: 9.5, 3: 5.0}),
        ("Here are the scores:\n[1] score: 4\n[2] 12\n[9] 7", {1: 4.0, 2: 10.0}),  # clamped, out of range
        ('{"1": 2, "2": 8, "x": 3}', {1: 2.0, 2: 8.0}),
        ("Scores: [2, 8, 5]", {1: 2.0, 2: 8.0, 3: 5.0}),
        ("[1] 3\n[1] 9", {1: 3.0}),  # the first score of a passage counts
        ("I cannot rank these.", {}),
        ("", {}),
    ],
)
def test_scores_are_read_leniently(reply: str, expected: dict[int, float]) -> None:
    assert parse_scores(reply, 3) == expected


# --- rerank -------------------------------------------------------------------------------------------------


def test_one_batched_call_reorders_by_score() -> None:
    model = scripted("[1] 2\n[2] 9\n[3] 5")
    result = rerank(model, QUESTION, hits(3), passage_chars=100)
    assert [hit.chunk_id for hit in result.hits] == ["c2", "c3", "c1"]
    assert result.reranked and result.reason == "" and result.scores == {1: 2.0, 2: 9.0, 3: 5.0}
    (prompt,) = model.received  # one call for every candidate
    assert isinstance(prompt[0], SystemMessage) and prompt[0].content == RERANK_SYSTEM
    text = str(prompt[1].content)
    assert isinstance(prompt[1], HumanMessage) and QUESTION in text
    assert all(f"[{n}] T{n}: passage number {n}" in text for n in (1, 2, 3))


def test_ties_and_unscored_candidates_keep_the_fused_order() -> None:
    result = rerank(scripted("[3] 5\n[2] 5\n[4] 1"), QUESTION, hits(4), passage_chars=100)
    assert [hit.chunk_id for hit in result.hits] == ["c2", "c3", "c4", "c1"]


@pytest.mark.parametrize("reply", ["I cannot rank these.", "%%% ###", "[1] 9"])
def test_garbage_keeps_the_fused_order(reply: str) -> None:
    result = rerank(scripted(reply), QUESTION, hits(4), passage_chars=100)
    assert [hit.chunk_id for hit in result.hits] == ["c1", "c2", "c3", "c4"]
    assert not result.reranked and "of 4 candidates" in result.reason


def test_one_score_for_every_candidate_keeps_the_fused_order() -> None:
    result = rerank(scripted("[1] 5\n[2] 5\n[3] 5"), QUESTION, hits(3), passage_chars=100)
    assert [hit.chunk_id for hit in result.hits] == ["c1", "c2", "c3"]
    assert not result.reranked and "same score (5)" in result.reason and result.calls == 1


def test_a_failed_call_keeps_the_fused_order() -> None:
    model = BrokenChatModel(messages=iter([]))
    result = rerank(model, QUESTION, hits(3), passage_chars=100)
    assert [hit.chunk_id for hit in result.hits] == ["c1", "c2", "c3"]
    assert not result.reranked and "ConnectionError" in result.reason and len(model.received) == 1


def test_passages_are_cut_to_the_setting() -> None:
    model = scripted("[1] 1\n[2] 2")
    long = [SearchHit("a", "x" * 1000, {}, 1.0), SearchHit("b", "y" * 1000, {}, 0.5)]
    rerank(model, QUESTION, long, passage_chars=50)
    text = str(model.received[0][1].content)
    assert "x" * 50 in text and "x" * 51 not in text


def test_one_candidate_needs_no_call() -> None:
    model = scripted("[1] 1")
    assert rerank(model, QUESTION, hits(1), passage_chars=100).reason == "fewer than two candidates"
    assert model.received == []


# --- modes, HyDE and Self-RAG switches ---------------------------------------------------------------------


def test_modes_change_k_and_weights() -> None:
    assert mode_retrieval(Context(mode="simple", top_k=6)) == (6, None)
    assert mode_retrieval(Context(mode="auto", top_k=6)) == (6, None)
    assert mode_retrieval(Context(mode="precise", top_k=6)) == (6, (0.8, 0.2))
    assert mode_retrieval(Context(mode="advanced", top_k=6)) == (2, None)
    assert mode_retrieval(Context(mode="advanced", top_k=5)) == (2, None)  # rounded up
    assert mode_retrieval(Context(mode="advanced", top_k=1)) == (1, None)


def test_advanced_mode_writes_three_queries_the_question_first() -> None:
    settings = load_settings()
    with use_resources(Resources(settings, generator=TaskChatModel(), strengths={"generate": "weak"})):
        queries, _ = build_queries(QUESTION, "DIRECT", Context(mode="advanced"))
        fixed, _ = build_queries(QUESTION, "DIRECT", Context(mode="advanced", rewrite="none"))
    assert len(queries) == 3 and queries[0]["text"] == QUESTION
    assert [query["text"] for query in fixed] == [QUESTION]  # an explicit rewrite method wins


@pytest.mark.parametrize(
    "analysis",
    [
        QueryAnalysis(query_type="OPEN_ENDED", complexity=5),
        QueryAnalysis(query_type="COMPLEX_REASONING", complexity=9),
    ],
)
def test_hyde_off_never_chooses_hyde(analysis: QueryAnalysis) -> None:
    accuracy = Context(preference="accuracy")
    assert choose_strategy(analysis, accuracy) == "HYDE"
    assert choose_strategy(analysis, replace(accuracy, hyde=False)) == "DIRECT"
    assert choose_strategy(analysis, replace(accuracy, hyde=False, rewrite="hyde")) == "HYDE"


def test_self_rag_off_accepts_the_first_answer_without_grading(calibrator: Any) -> None:
    calibrator(constant(0.5))  # the judgement is not sure of the draft: self-RAG would revise it
    source = {
        "chunk_id": "c1",
        "text": "Saturn has rings of ice.",
        "source": "s.md",
        "title": "Saturn",
        "page": -1,
        "doc_id": "d1",
        "score": 1.0,
        "relevance": 1.0,
        "query": QUESTION,
        "metadata": {},
    }
    state = {"question": QUESTION, "draft": "Mars is the largest planet [1].", "sources": [source]}
    bad = '{"grounded": false, "answers_question": false, "relevance": 0.1, "accuracy": 0.0}'
    grader = TaskChatModel(replies={"grade_answer": bad})
    resources = Resources(
        load_settings(), generator=grader, strengths={"generate": "strong", "grade": "strong"}
    )
    with use_resources(resources):
        on = grade_answer(state, runtime(self_rag=True, grader="llm"))  # type: ignore[arg-type]
        calls = len(grader.calls)
        assert calls >= 1 and on["next_action"] != "accept"
        off = grade_answer(state, runtime(self_rag=False, grader="llm"))  # type: ignore[arg-type]
    assert len(grader.calls) == calls  # no grading call
    assert off["next_action"] == "accept" and off["answer_grade"]["grader"] == "off"


# --- rag eval retrieval --rerank ----------------------------------------------------------------------------


class PrefersGamma(BaseChatModel):
    """A rerank model that gives the passage titled Gamma 9 and every other one 1 (it reads the prompt)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "prefers-gamma"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **_: Any) -> ChatResult:
        self.calls += 1
        numbers = re.findall(r"^\[(\d+)\] (\w*)", str(messages[-1].content), flags=re.MULTILINE)
        reply = "\n".join(f"[{n}] {9 if title == 'Gamma' else 1}" for n, title in numbers)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def test_eval_retrieval_reports_the_reranked_hybrid_list(
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = [
        ("d1", "Alpha", "alpha text about stars"),
        ("d2", "Beta", "beta text"),
        ("d3", "Gamma", "gamma"),
    ]
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in corpus)
    )
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "alpha text about stars"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    monkeypatch.setattr(retrieval_eval.KnowledgeBase, "open", staticmethod(make_kb))
    model = PrefersGamma()
    report = retrieval_eval.run_retrieval_eval(folder, make_settings(), modes=["hybrid"], rerank_model=model)
    assert model.calls == 1  # one scoring call per query
    assert report["rerank"]["queries_reranked"] == 1
    # Fusion puts the lexical match first; the model's scores lift the judged document to the top.
    assert report["modes"]["hybrid"]["mrr@10"] < 1.0
    assert report["modes"][retrieval_eval.RERANK_MODE]["mrr@10"] == 1.0


def test_eval_retrieval_keeps_the_split_it_is_asked_for(
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`rag eval retrieval --split dev` scores only the dev half (q2 is dev, q1 test: evals.splits)."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": i, "text": f"{i} text"}) + "\n" for i in ("d1", "d2"))
    )
    queries = {"q1": "d1 text", "q2": "d2 text"}
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    monkeypatch.setattr(retrieval_eval.KnowledgeBase, "open", staticmethod(make_kb))
    run = retrieval_eval.run_retrieval_eval
    assert run(folder, make_settings(), modes=["bm25"])["queries"] == 2
    dev = run(folder, make_settings(), modes=["bm25"], split="dev")
    assert dev["queries"] == 1 and dev["split"] == "dev"
    with pytest.raises(ValueError, match="unknown split"):
        run(folder, make_settings(), modes=["bm25"], split="train")

"""Honest "not found": when no passage supports an answer the engine says so, an answerable
question keeps its cited answer, and chat mode still answers from the conversation. The term checks of
retrieval.answerability are signals of the judgement (answering.signals); the tests here drive the decision
with calibrators of known numbers (tests/helpers/calibrators.py).

The graph runs for real (in-memory checkpointer) over a knowledge base with fake embeddings and a chat model
scripted per task (tests.fakes). Passages, questions and the HotpotQA-format file below are invented.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from answering.decision import REASON_MISSING_ANCHORS, REASON_READER_DECLINED
from answering.signals import DraftFacts, draft_signals
from benchmarks.answerability import (
    ABSENT,
    DEV_SET,
    PRESENT,
    is_dev_set,
    load_dev_set,
    qa_set,
    run_answerability_eval,
)
from graphs.rag import build_graph
from nodes.cite import cite
from nodes.grade_retrieval import decide_after_retrieval
from nodes.not_found import REASON_NOTHING_RELEVANT, REASON_NOTHING_RETRIEVED, REASON_STORE_DOWN, not_found
from nodes.resources import Resources, use_resources
from prompts.answer import NOT_FOUND_EN
from retrieval.answer_text import answer_parts
from retrieval.answerability import MIN_QUESTION_COVERAGE, missing_question_anchors, question_anchors
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.answer_record import Candidates
from state.context import Context
from state.schemas import RetrievedDoc
from tests.conftest import isolated_settings, runtime, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel
from tests.helpers.calibrators import following
from tests.helpers.passages import passage

CORPUS = {
    "tarrow.md": "# Tarrow viaduct\n\nThe Tarrow viaduct carries the valley railway over the river Ness. "
    "It is 612 metres long and has 14 arches. Its piers are built of local granite.",
    "corran.md": "# Corran\n\nCorran is a market town on the river Ness. Its weekly wool market is held "
    "every Thursday.",
}
ANSWERABLE = "How long is the Tarrow viaduct?"
ANSWER = "The Tarrow viaduct is 612 metres long [1]."
#: A viaduct the corpus never names; the fake model still writes a confident answer from the passages.
UNANSWERABLE = "How long is the Marlow viaduct?"
MADE_UP = "The Marlow viaduct is 612 metres long [1]."


TARROW = passage(1, CORPUS["tarrow.md"].split("\n\n", 1)[1], "Tarrow viaduct")
CORRAN = passage(2, CORPUS["corran.md"].split("\n\n", 1)[1], "Corran")


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    base = KnowledgeBase(isolated_settings(tmp_path), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    ingest_paths(base, list(write_corpus(tmp_path / "corpus", CORPUS).values()))
    yield base
    base.close()


def ask(kb: KnowledgeBase, model: TaskChatModel, *questions: str, **context: Any) -> dict[str, Any]:
    """Ask `questions` in turn on one thread; the last turn's output."""
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    resources = Resources(
        kb.settings, knowledge_base=kb, generator=model, grader=model, strengths={"generate": "weak"}
    )
    out: dict[str, Any] = {}
    with use_resources(resources):
        for question in questions:
            out = graph.invoke({"question": question}, config=config, context=Context(**context))
    return out


# --- the graph ---------------------------------------------------------------------------------------------


def test_an_answerable_question_keeps_its_cited_answer(kb: KnowledgeBase) -> None:
    out = ask(kb, TaskChatModel(replies={"generate": ANSWER}), ANSWERABLE, max_iterations=1)
    # Every answer starts with its short answer (the span the model's sentence names), then the sentence.
    assert out["answer"] == f"612 metres\n\n{ANSWER}" and not out["not_found"]
    assert out["short_answer"] == "612 metres"
    assert [citation["title"] for citation in out["citations"]] == ["Tarrow viaduct"]


def test_a_question_about_a_name_no_passage_mentions_is_not_found(kb: KnowledgeBase, calibrator: Any) -> None:
    """A calibrator that weighs the missing name declines the made-up answer, and says so."""
    calibrator(following("missing_anchors", inverted=True))
    model = TaskChatModel(replies={"generate": MADE_UP})
    out = ask(kb, model, UNANSWERABLE, max_iterations=1)
    assert out["answer"] == NOT_FOUND_EN and out["not_found"] and out["band"] == "not_found"
    assert out["not_found_reason"] == REASON_MISSING_ANCHORS
    assert out["citations"] == [] and out["sources"] == []
    assert MADE_UP not in out["answer"]


def test_chat_mode_still_answers_from_the_conversation(kb: KnowledgeBase) -> None:
    """A follow-up about something only the conversation holds: chat mode answers it from history."""
    remembered = "My bicycle is called Zephyrine."
    from_history = "Your bicycle is called Zephyrine."

    def reply(messages: list[Any]) -> str:
        earlier = " ".join(str(message.content) for message in messages[1:-1])
        return from_history if "Zephyrine" in earlier else "I do not know."

    model = TaskChatModel(replies={"chat": reply, "generate": reply}, fallback="Noted.")
    out = ask(kb, model, remembered, "What is my bicycle called?", answer_source="chat", max_iterations=1)
    assert out["answer"] == from_history and not out["not_found"]


def test_retrieval_decision_is_not_found_only_in_rag_mode() -> None:
    state: dict[str, Any] = {"retrieval_rounds": 1, "strategy": "HYBRID"}
    rag, chat = Context(max_iterations=1), Context(max_iterations=1, answer_source="chat")
    assert decide_after_retrieval(state, rag, found=True, relevant=0, unanswerable=True) == "not_found"
    assert decide_after_retrieval(state, rag, found=True, relevant=0, unanswerable=False) == "generate"
    assert decide_after_retrieval(state, chat, found=True, relevant=0, unanswerable=True) == "generate"


def test_the_answer_says_why_it_is_not_found_and_keeps_what_was_declined(calibrator: Any) -> None:
    """cite and not_found name their reason; a declined draft is kept in the answer record."""
    calibrator(following("missing_anchors", inverted=True))
    question = {"messages": [HumanMessage(UNANSWERABLE)], "question": UNANSWERABLE}
    declined = cite({**question, "draft": MADE_UP, "sources": [TARROW], "documents": [TARROW]}, runtime())
    assert declined["answer"] == NOT_FOUND_EN and declined["band"] == "not_found"
    assert declined["not_found_reason"] == REASON_MISSING_ANCHORS
    kept_draft = declined["answer_record"]
    assert "Marlow" in f"{kept_draft['short_answer']} {kept_draft['explanation']}"
    answered = {"messages": [HumanMessage(ANSWERABLE)], "question": ANSWERABLE}
    kept = cite({**answered, "draft": ANSWER, "sources": [TARROW], "documents": [TARROW]}, runtime())
    assert not kept["not_found"] and kept["not_found_reason"] == "" and kept["band"] == "confident"
    # the reader said the passages do not answer, and no other reader proposed an answer
    calibrator(following("reader_declined", inverted=True))
    by_model = cite(
        {
            **answered,
            "draft": NOT_FOUND_EN,
            "sources": [TARROW],
            "documents": [TARROW],
            "prompt_info": {"reader_declined": True},
        },
        runtime(),
    )
    assert by_model["not_found"] and by_model["not_found_reason"] == REASON_READER_DECLINED
    assert not_found({**question, "documents": []}, runtime())["not_found_reason"] == REASON_NOTHING_RETRIEVED
    assert (
        not_found({**question, "documents": [TARROW]}, runtime())["not_found_reason"]
        == REASON_NOTHING_RELEVANT
    )
    down = not_found({**question, "error": "connection refused"}, runtime())
    assert down["not_found_reason"] == REASON_STORE_DOWN and "connection refused" not in down["answer"]
    assert "could not be searched" in down["answer"]


# --- the decision ------------------------------------------------------------------------------------------


def term_checks(question: str, answer: str, sources: list[RetrievedDoc]) -> dict[str, float]:
    """The term-check signals of a draft written from `sources` (answering.signals)."""
    short, explanation = answer_parts(answer)
    facts = DraftFacts(
        question=question,
        short_answer=short,
        explanation=explanation,
        candidates=Candidates(draft=short, focused_read="", extractive=""),
        sources=sources,
        evidence=[],
        documents=sources,
        short_logprobs=[],
        short_answer_source="model",
        reader_declined=False,
        generation_fallback=False,
        comparison=False,
        strategy="HYBRID",
    )
    signals = draft_signals(facts)
    return {name: signals[name] for name in ("missing_anchors", "term_coverage", "term_check_declines")}


def test_the_term_checks_are_signals_of_the_judgement() -> None:
    assert term_checks(ANSWERABLE, ANSWER, [TARROW, CORRAN]) == {
        "missing_anchors": 0.0,
        "term_coverage": 1.0,
        "term_check_declines": 0.0,
    }
    assert term_checks(UNANSWERABLE, MADE_UP, [TARROW])["missing_anchors"] == 1.0  # "Marlow"
    assert term_checks(UNANSWERABLE, MADE_UP, [TARROW])["term_check_declines"] == 1.0
    # the subject is there, the asked attribute nowhere: the passages cover too little of the question
    unrelated = "The Tarrow viaduct carries the valley railway over the river Ness [1]."
    cost = term_checks("What did the Tarrow viaduct cost to build?", unrelated, [TARROW])
    assert cost["missing_anchors"] == 0.0 and cost["term_coverage"] < MIN_QUESTION_COVERAGE
    assert cost["term_check_declines"] == 1.0


def test_a_wrong_citation_is_not_a_missing_answer() -> None:
    """The sentence cites the Corran passage but the Tarrow passage the reader also saw supports it."""
    miscited = "The Tarrow viaduct is 612 metres long [1]."
    assert term_checks(ANSWERABLE, miscited, [CORRAN, TARROW])["term_check_declines"] == 0.0


@pytest.mark.parametrize(
    ("question", "kept"),
    [
        ("What is the largest planet in the Solar System? Please.", ("Solar System",)),
        ("Who designed the Gethin bridge in 1850?", ("Gethin", "1850")),
        ("塔罗高架桥有多长？", ("塔罗高架桥",)),
    ],
)
def test_question_anchors_leave_out_requests_and_question_words(question: str, kept: tuple[str, ...]) -> None:
    assert question_anchors(question).all() == kept


def test_a_chinese_term_is_missing_only_when_no_character_pair_of_it_is_there() -> None:
    """Terms cut at function characters straddle words ("里建成" of "在哪里建成"): a passage that answers
    holds their words, not the run; a passage about something else holds none of their pairs."""
    question = "澄河石桥在哪里建成？"
    answering = passage(1, "青石桥横跨澄河，1931年建成。", "青石桥")
    elsewhere = passage(2, "林州位于北方，盛产小麦。", "林州")
    assert question_anchors(question).cjk == ("澄河石桥", "里建成")
    assert missing_question_anchors(question, [answering]) == []
    assert missing_question_anchors(question, [elsewhere]) == ["澄河石桥", "里建成"]
    assert question_anchors("桥有什么特点？").cjk == ()  # two-character words of a question are no names


def test_missing_anchors_read_titles_too() -> None:
    assert missing_question_anchors("Where is Corran?", [CORRAN]) == []
    assert missing_question_anchors("Where is Kestrel Bay?", [TARROW, CORRAN]) == ["Kestrel Bay"]


@pytest.mark.parametrize(
    ("question", "text", "title"),
    [
        # a possessive inside a name is part of it; a contraction opening the question is no name
        (
            "Which was founded earlier, Penn State or Queen's University?",
            "Queen's University, 1841. Penn State.",
            "",
        ),
        (
            "Where's Officer Tuba? is a comedy film that stars whom?",
            "Where's Officer Tuba? is a 1986 film.",
            "",
        ),
        # an initial stays inside the name it belongs to
        ("Where is the academy Joseph D. Stewart led?", "Joseph D. Stewart was its superintendent.", ""),
        # punctuation does not hide a name or a quoted term
        ("Is EOG Resources Inc. a petroleum company?", "EOG Resources, Inc. is an oil company.", ""),
        (
            'What is the job of his character in "Baby Driver?"',
            "In Baby Driver he plays a getaway driver.",
            "",
        ),
        # a capitalised word glued to a name of three words or more need not be in the passage
        ("Is James Norman Hall Argentinian?", "James Norman Hall was an American author.", ""),
        # a bound the question compares against is not a fact the passage states
        ("Who has written more than 300 papers, Gershgorin?", "Gershgorin wrote many papers.", "Gershgorin"),
    ],
)
def test_names_are_found_whatever_their_punctuation(question: str, text: str, title: str) -> None:
    assert missing_question_anchors(question, [passage(1, text, title)]) == []


def test_a_name_that_differs_is_still_missing() -> None:
    """Loose matching forgives punctuation, not a different name: the check still catches invented ones."""
    text = "Queen's University was founded in 1841 by royal charter."
    assert missing_question_anchors("When was King's University founded?", [passage(1, text)]) == [
        "King's University"
    ]
    assert missing_question_anchors("Who led Joseph P. Stewart's academy?", [passage(1, text)]) == [
        "Joseph P. Stewart"
    ]
    # two-word names have no part to fall back on; numbers that are facts, not bounds, still count
    assert missing_question_anchors("Is Kevin Ullyett older?", [passage(1, text)]) == ["Kevin Ullyett"]
    assert missing_question_anchors("What happened there in 1902?", [passage(1, text)]) == ["1902"]


def test_a_name_only_the_title_of_its_passage_holds_is_not_missing() -> None:
    """The reader sees a compressed passage as "Title: first sentence" and may quote that line: the
    question's name is found in the title."""
    source = passage(1, "Eric Anthony Sykes (1883-1945) was born in Eccles, England.", "Eric A. Sykes")
    answer = "England\n\nEric A. Sykes Eric Anthony Sykes (1883-1945) was born in Eccles, England. [1]"
    question = "What country is Eric A. Sykes from?"
    assert term_checks(question, answer, [source])["missing_anchors"] == 0.0
    untitled = passage(1, source["text"])
    assert term_checks(question, answer, [untitled])["missing_anchors"] == 1.0


# --- the evaluation ----------------------------------------------------------------------------------------


def test_the_dev_set_is_balanced_and_recognised() -> None:
    dev = load_dev_set()
    labels = [case.answerable for case in dev.cases]
    assert labels.count(True) == labels.count(False) >= 10
    assert is_dev_set(DEV_SET)


def hotpot_record(qid: str, gold: list[str], others: list[str]) -> dict[str, Any]:
    return {
        "_id": qid,
        "question": f"Question {qid}?",
        "answer": "x",
        "type": "bridge",
        "level": "hard",
        "supporting_facts": [[title, 0] for title in gold],
        "context": [[title, [f"{title} is a place."]] for title in [*gold, *others]],
    }


def test_hotpot_set_removes_every_evaluated_gold_paragraph_from_the_absent_corpus(tmp_path: Path) -> None:
    path = tmp_path / "hotpot.jsonl"
    records = [
        hotpot_record("a", ["Avel", "Brin"], ["Cosk", "Dray"]),
        hotpot_record("b", ["Cosk", "Eln"], ["Avel", "Fenn"]),  # a's gold is b's distractor and vice versa
        hotpot_record("c", ["Gath", "Hume"], []) | {"context": [["Gath", ["Gath is a place."]]]},  # gold lost
    ]
    path.write_text("\n".join(json.dumps(record) for record in records), encoding="utf-8")
    chosen = qa_set(path, limit=5)
    present = {p.passage_id for p in chosen.corpora[PRESENT]}
    absent = {p.passage_id for p in chosen.corpora[ABSENT]}
    assert present == {"Avel", "Brin", "Cosk", "Dray", "Eln", "Fenn"}  # c is left out: a gold is missing
    assert absent == {"Dray", "Fenn"}
    assert [(c.qid, c.corpus, c.answerable) for c in chosen.cases] == [
        ("a", PRESENT, True),
        ("b", PRESENT, True),
        ("a", ABSENT, False),
        ("b", ABSENT, False),
    ]


def test_a_cmrc_set_takes_its_absent_corpus_from_the_pool_and_skips_a_development_block(
    tmp_path: Path,
) -> None:
    """CMRC questions have no distractors: without a pool the absent corpus would be empty (refused); with
    one, it is the other articles. --skip leaves the development questions out of the reported block."""

    def article(n: int) -> dict[str, Any]:
        question = {
            "id": f"q{n}",
            "question": f"第{n}篇讲了什么？",
            "answers": [{"text": "内容", "answer_start": 4}],
        }
        paragraph = {"id": f"art{n}-p", "context": f"第{n}篇文章的内容。", "qas": [question]}
        return {"id": f"art{n}", "title": f"文章{n}", "paragraphs": [paragraph]}

    articles = [article(n) for n in range(1, 5)]
    path = tmp_path / "cmrc.json"
    path.write_text(json.dumps({"version": "v1.0", "data": articles}, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ValueError, match="--pool"):
        qa_set(path, limit=2)
    chosen = qa_set(path, limit=2, skip=1, pool="all")
    assert [case.qid for case in chosen.cases] == ["q2", "q3", "q2", "q3"]
    absent = {passage.text for passage in chosen.corpora[ABSENT]}
    assert absent == {"第1篇文章的内容。", "第4篇文章的内容。"}
    assert len(chosen.corpora[PRESENT]) == 4


def test_the_extractive_evaluation_over_the_dev_set(tmp_path: Path, calibrator: Any) -> None:
    """The command's run end to end with fake embeddings: every case gets a record; with a calibrator that
    weighs the question's missing names, the absent-name questions (a name no document has) are all not
    found, and answerable ones mostly answered."""
    calibrator(following("missing_anchors", inverted=True))
    settings = isolated_settings(tmp_path)

    def resources(eval_settings: Any) -> Resources:
        kb = KnowledgeBase(eval_settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
        return Resources(eval_settings, knowledge_base=kb)

    dev = load_dev_set()
    report = run_answerability_eval(dev, settings, pipeline="extractive", resources=resources)
    assert report["n_absent"] + report["n_present"] == len(dev.cases) == len(report["records"])
    unknown_names = [r for r in report["records"] if not r["answerable"] and missing_question_anchors(
        r["question"], [passage(i, p.text, p.title) for i, p in enumerate(dev.corpora["dev"])]
    )]  # fmt: skip
    assert unknown_names and all(r["not_found"] for r in unknown_names)
    assert report["not_found_rate_present"] is not None and report["not_found_rate_present"] <= 0.25


def test_chinese_coverage_counts_characters_not_bigrams() -> None:
    """An answer that restates a Chinese question in other words shares its characters, not its bigrams
    (bigrams straddle word boundaries); a passage about something else shares neither."""
    from retrieval.answerability import question_coverage

    question = "澄河上的石桥是哪一年建成的？"
    restated = "青石桥横跨澄河，于1931年建成。"
    assert question_coverage(question, [restated]) >= MIN_QUESTION_COVERAGE
    assert question_coverage(question, ["林州位于北方，盛产小麦。"]) < MIN_QUESTION_COVERAGE
    assert question_coverage("谁在哪？", ["任何文字"]) == 1.0  # nothing but question characters
    assert question_coverage("Tarrow 大桥有多长？", ["Tarrow 大桥长612米。"]) >= MIN_QUESTION_COVERAGE
    assert question_coverage("Tarrow 大桥有多长？", ["大桥长612米。"]) < 1.0  # the Latin name counts

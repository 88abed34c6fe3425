"""Tests of the answer nodes with scripted fake models: generate (prompts, document choice, fallbacks,
Chinese), grade_answer (score grader, LLM grader, routes), cite (best answer over a worse draft), and a
small generate -> grade_answer -> cite graph (loop bound, token streaming)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult
from langgraph.graph import END, START, StateGraph

import nodes.grade_answer as grade_answer_module
from models.errors import ModelUnavailableError
from nodes.cite import cite
from nodes.generate import generate
from nodes.grade_answer import grade_answer
from prompts.answer import (
    ANSWER_SYSTEM_PROMPTS,
    NO_RETRIEVAL_SYSTEM_EN,
    NOT_FOUND_EN,
    NOT_FOUND_ZH,
    REVISION_NOTE_EN,
)
from state.context import Context
from state.graph_state import State
from state.schemas import AnswerGrade, RetrievedDoc
from tests.conftest import runtime
from tests.fakes import BrokenChatModel, ScriptedChatModel, scripted
from tests.helpers.calibrators import constant
from tests.helpers.calibrators import scripted as scripted_calibrator

QUESTION = "What is the capital of France?"
GOOD_ANSWER = "Paris is the capital of France [1]."
PARTIAL_ANSWER = "Paris is the capital [1]."
UNGROUNDED_ANSWER = "The capital of France is Lyon, famous for silk weaving and puppets [1]."


def doc(index: int, text: str, *, relevance: float = 0.9, score: float = 1.0) -> RetrievedDoc:
    return RetrievedDoc(
        chunk_id=f"chunk-{index}",
        text=text,
        source=f"/corpus/doc{index}.md",
        title=f"Doc {index}",
        page=index,
        doc_id=f"doc{index}",
        score=score,
        relevance=relevance,
        query=QUESTION,
        metadata={},
    )


PARIS = doc(
    1, "France is a country in Europe. Paris is the capital of France. It hosts many museums.", relevance=0.9
)
TOWER = doc(2, "The Eiffel Tower was completed in 1889.", relevance=0.5, score=3.0)
NOISE = doc(3, "Bananas are rich in potassium.", relevance=0.1, score=5.0)


# --- generate ---------------------------------------------------------------------------------------------


def test_generate_uses_relevant_documents_mode_prompt_and_history(install: Any) -> None:
    model = scripted(GOOD_ANSWER)
    install(model)
    state: State = {
        "question": QUESTION,
        "documents": [NOISE, TOWER, PARIS],
        "messages": [HumanMessage("Hello"), AIMessage("Hi! Ask me anything."), HumanMessage(QUESTION)],
    }
    update = generate(state, runtime(mode="precise"))

    # The model answered without the "Answer:" line: the extractive answerer's span, which the model's
    # sentence names, goes in front as the short answer.
    assert update["draft"] == f"Paris\n\n{GOOD_ANSWER}"
    assert update["sources"] == [PARIS, TOWER]  # relevant only, by relevance (NOISE is below 0.35)
    assert update["generation_rounds"] == 1 and update["llm_calls"] == 1
    assert {"generate", "model"} <= set(update["timings_ms"])
    assert (
        update["prompt_info"]["documents_used"] == 2 and update["prompt_info"]["generation_fallback"] is None
    )
    system, *history, human = model.received[0]
    assert system.content == ANSWER_SYSTEM_PROMPTS[("precise", "en")]
    assert [message.content for message in history] == ["Hello", "Hi! Ask me anything."]
    assert "[1] (File: doc1.md, Page: 1, Score: 1)\nFrance is a country" in human.content
    assert "[2] (File: doc2.md, Page: 2, Score: 3)" in human.content and "Bananas" not in human.content


def test_a_near_duplicate_of_another_file_is_dropped_and_citations_still_name_what_the_model_saw(
    install: Any,
) -> None:
    copy = {**PARIS, "chunk_id": "copy-1", "source": "/mirror/doc1.md", "relevance": 0.8}
    model = scripted("Answer: 1889\nExplanation: The Eiffel Tower was completed in 1889 [2].")
    install(model)
    state: State = {"question": "When was the Eiffel Tower completed?", "documents": [copy, PARIS, TOWER]}
    update = generate(state, runtime(mode="simple"))

    human = str(model.received[0][-1].content)
    assert human.count("Paris is the capital of France.") == 1 and "[3]" not in human
    assert update["sources"] == [PARIS, TOWER]  # the better scored copy, then the tower as [2]
    assert update["prompt_info"]["documents_duplicate"] == 1
    cited = cite({**state, "draft": update["draft"], "sources": update["sources"]}, runtime())
    assert [citation["chunk_id"] for citation in cited["citations"]] == [TOWER["chunk_id"]]


def test_generate_prefers_standalone_question_and_falls_back_to_top_scores(install: Any) -> None:
    model = scripted("Bananas are rich in potassium [1].")
    install(model)
    low = [
        doc(1, "A text.", relevance=0.1, score=1.0),
        doc(2, "Bananas are rich in potassium.", relevance=0.2, score=9.0),
    ]
    state: State = {
        "question": "and bananas?",
        "standalone_question": "What are bananas rich in?",
        "documents": low,
    }
    update = generate(state, runtime(top_k=1))

    assert update["sources"] == [low[1]]
    assert model.received[0][-1].content.endswith("Question: What are bananas rich in?")


@pytest.mark.parametrize(
    "reply", ["", "   ", "!!!!", "?!... ---", "I think I think I think I think I think " * 3]
)
def test_generate_falls_back_to_extractive_answer_on_garbage(install: Any, reply: str) -> None:
    install(scripted(reply))
    update = generate({"question": QUESTION, "documents": [PARIS, TOWER]}, runtime())

    assert update["draft"] == "Paris\n\nParis is the capital of France. [1]"
    assert update["sources"] == [PARIS]
    assert update["prompt_info"]["generation_fallback"] == "unusable model output"


class RejectingChatModel(ScriptedChatModel):
    """An endpoint that is up but rejects the request (as a 400 for a too-long prompt would)."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        raise ValueError("this model's maximum context length is 2048 tokens")


def test_generate_falls_back_when_the_model_rejects_the_request(install: Any) -> None:
    install(RejectingChatModel(messages=iter([])))
    update = generate({"question": QUESTION, "documents": [PARIS]}, runtime())

    assert update["draft"].endswith("[1]") and "Paris is the capital of France." in update["draft"]
    assert "maximum context length" in update["prompt_info"]["generation_fallback"]
    assert update["llm_calls"] == 1


def test_generate_raises_model_unavailable_when_the_endpoint_is_down(install: Any) -> None:
    """Not an extractive answer that looks normal: the outage reaches the caller (CLI exit 1, HTTP 503)."""
    install(BrokenChatModel(messages=iter([])))
    with pytest.raises(ModelUnavailableError, match="ConnectionError"):
        generate({"question": QUESTION, "documents": [PARIS]}, runtime())


def test_generate_without_documents_uses_the_no_retrieval_prompt(install: Any) -> None:
    model = scripted("Hello! How can I help you with your documents?")
    install(model)
    update = generate({"question": "Hi there", "messages": [HumanMessage("Hi there")]}, runtime())

    assert update["draft"] == "Hello! How can I help you with your documents?"
    assert update["sources"] == []
    system, human = model.received[0]
    assert system.content == NO_RETRIEVAL_SYSTEM_EN and human.content == "Hi there"


def test_generate_adds_revision_note_when_regenerating(install: Any) -> None:
    model = scripted(GOOD_ANSWER)
    install(model)
    state: State = {
        "question": QUESTION,
        "documents": [PARIS],
        "generation_rounds": 1,
        "next_action": "regenerate",
    }
    generate(state, runtime(mode="simple"))
    assert model.received[0][0].content == ANSWER_SYSTEM_PROMPTS[("simple", "en")] + REVISION_NOTE_EN


def test_the_grader_names_what_was_wrong_and_the_next_attempt_reads_it(install: Any, calibrator: Any) -> None:
    """The ungrounded draft names Lyon, which its source does not say: the grade lists that sentence with
    the name, and the regenerated prompt carries it under the revision note."""
    calibrator(constant(0.5))  # not confident: the loop goes on
    graded = grade_answer(
        {"question": QUESTION, "draft": UNGROUNDED_ANSWER, "sources": [PARIS], "generation_rounds": 1},
        runtime(grader="score", max_iterations=3),
    )
    problems = graded["answer_grade"]["problems"]
    assert graded["next_action"] != "accept"
    assert len(problems) >= 1 and "Lyon" in problems[0] and UNGROUNDED_ANSWER[:30] in problems[0]

    model = scripted(GOOD_ANSWER)
    install(model)
    generate(
        {
            "question": QUESTION,
            "documents": [PARIS],
            "generation_rounds": 1,
            "next_action": "regenerate",
            "answer_grade": graded["answer_grade"],
        },
        runtime(mode="simple"),
    )
    system = str(model.received[0][0].content)
    assert system.startswith(ANSWER_SYSTEM_PROMPTS[("simple", "en")] + REVISION_NOTE_EN)
    assert "What was wrong with it:" in system and f"- {problems[0]}" in system


def test_an_accepted_answer_has_no_problems(install: Any) -> None:
    graded = grade_answer(
        {"question": QUESTION, "draft": GOOD_ANSWER, "sources": [PARIS], "generation_rounds": 1},
        runtime(grader="score"),
    )
    assert graded["next_action"] == "accept" and graded["answer_grade"]["problems"] == []


def test_generate_chinese_question_uses_chinese_prompts_and_fallback(install: Any) -> None:
    model = scripted("")
    install(model)
    source = doc(1, "埃菲尔铁塔建于1889年。巴黎是法国的首都。", relevance=0.9)
    update = generate({"question": "法国的首都是哪里？", "documents": [source]}, runtime())

    system, human = model.received[0]
    assert system.content == ANSWER_SYSTEM_PROMPTS[("advanced", "zh")]
    assert human.content.startswith("资料：") and human.content.endswith("问题：法国的首都是哪里？")
    assert update["draft"] == "巴黎\n\n巴黎是法国的首都。[1]"


def test_generate_strips_echoed_headers_and_cross_language_fallback_keeps_spacing(install: Any) -> None:
    install(scripted("[1] (File: doc1.md, Page: 1)\nParis is the capital of France [1]."))
    update = generate({"question": QUESTION, "documents": [PARIS]}, runtime())
    assert update["draft"] == "Paris\n\nParis is the capital of France [1]."

    install(scripted("(File: doc1.md)"))
    update = generate({"question": "巴黎是哪个国家的首都？Paris capital", "documents": [PARIS]}, runtime())
    # The short answer (the country asked for), then the sentence with a space: the source is English.
    assert update["draft"] == "France\n\nParis is the capital of France. [1]"


def test_generate_uses_generation_reserve_as_max_tokens(install: Any) -> None:
    class Bounded(ScriptedChatModel):
        max_tokens: int | None = None

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            assert self.max_tokens == 77
            return super()._generate(messages, *args, **kwargs)

    install(Bounded(messages=iter([AIMessage(GOOD_ANSWER)])))
    update = generate(
        {"question": QUESTION, "documents": [PARIS]}, runtime(generation_reserve=77, answerer="model")
    )
    assert update["draft"] == GOOD_ANSWER and update["prompt_info"]["reserve"] == 77


# --- grade_answer -----------------------------------------------------------------------------------------


def score_answer(
    question: str, answer: str, sources: list[RetrievedDoc], relevance_threshold: float | None = None
) -> AnswerGrade:
    """The score grader at the run's relevance threshold (RAG_RELEVANCE_THRESHOLD) unless one is given."""
    threshold = Context().relevance_threshold if relevance_threshold is None else relevance_threshold
    return grade_answer_module.score_answer(question, answer, sources, relevance_threshold=threshold)


def test_score_grader_separates_grounded_from_ungrounded_answers() -> None:
    grounded = score_answer(QUESTION, GOOD_ANSWER, [PARIS])
    ungrounded = score_answer(QUESTION, UNGROUNDED_ANSWER, [PARIS])

    assert grounded.grounded and grounded.answers_question
    assert grounded.accuracy == pytest.approx(1.0) and grounded.relevance == pytest.approx(1.0)
    assert not ungrounded.grounded and ungrounded.accuracy < 0.5
    assert (grounded.relevance + grounded.accuracy + grounded.completeness + grounded.clarity) / 4 >= 0.7


def test_score_grader_penalises_garbage_repetition_and_cut_off_text() -> None:
    assert score_answer(QUESTION, "!!!!", [PARIS]).clarity == 0.0
    looping = score_answer(QUESTION, "Paris is the capital. " * 10, [PARIS])
    assert looping.clarity == 0.0
    cut = score_answer(QUESTION, "Paris is the capital of France and it", [PARIS])
    assert cut.clarity < 1.0


def test_score_grader_judges_not_found_answers_by_source_relevance() -> None:
    with_relevant = score_answer(QUESTION, NOT_FOUND_EN, [PARIS])
    without_relevant = score_answer(QUESTION, NOT_FOUND_EN, [NOISE])
    assert not with_relevant.answers_question and with_relevant.completeness == 0.0
    assert without_relevant.answers_question and without_relevant.grounded


@pytest.mark.parametrize(("threshold", "right"), [(0.6, True), (0.4, False)])
def test_a_not_found_answer_is_judged_by_the_runs_relevance_threshold(
    install: Any, threshold: float, right: bool
) -> None:
    """One bar for "relevant" (RAG_RELEVANCE_THRESHOLD): a source under the run's threshold, which
    grade_retrieval would not count as relevant, does not make "not found" wrong."""
    install(scripted(), strength="weak")
    state = grade_state(NOT_FOUND_EN, sources=[TOWER])  # relevance 0.5
    update = grade_answer(state, runtime(relevance_threshold=threshold))
    assert update["answer_grade"]["answers_question"] is right


def test_the_score_grader_reads_the_relevance_threshold_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_RELEVANCE_THRESHOLD", "0.6")
    assert score_answer(QUESTION, NOT_FOUND_EN, [TOWER]).answers_question  # 0.5 < 0.6: nothing relevant
    assert not score_answer(QUESTION, NOT_FOUND_EN, [TOWER], relevance_threshold=0.4).answers_question


def test_score_grader_chinese_answer() -> None:
    source = doc(1, "巴黎是法国的首都，也是法国最大的城市。")
    good = score_answer("法国的首都是哪里？", "法国的首都是巴黎[1]。", [source])
    bad = score_answer("法国的首都是哪里？", "法国的首都是里昂，以丝绸闻名[1]。", [source])
    assert good.grounded and good.answers_question and good.relevance == pytest.approx(1.0)
    assert not bad.grounded


def grade_state(draft: str, **extra: Any) -> State:
    state: State = {"question": QUESTION, "draft": draft, "sources": [PARIS], "generation_rounds": 1}
    state.update(extra)  # type: ignore[typeddict-item]
    return state


def test_grade_answer_accepts_a_good_answer_and_records_the_candidate(install: Any) -> None:
    install(scripted(), strength="weak")
    update = grade_answer(grade_state(GOOD_ANSWER), runtime())

    assert update["next_action"] == "accept"
    assert update["answer_grade"]["grader"] == "score" and update["answer_grade"]["grounded"] is True
    # the loop's score is the judgement's probability (the tests' calibrator: 0.9), kept with the candidate
    assert update["answer_score"] == update["answer_grade"]["score"] == 0.9
    best = update["best_answer"]
    assert best["text"] == GOOD_ANSWER and best["round"] == 1 and best["doc_ids"] == ["chunk-1"]
    assert best["record"]["probability"] == 0.9 and best["record"]["band"] == "confident"
    assert "llm_calls" not in update  # the score grader calls no model


def test_grade_answer_regenerates_a_grounded_answer_it_is_not_confident_of(
    install: Any, calibrator: Any
) -> None:
    calibrator(constant(0.5))
    install(scripted(), strength="weak")
    update = grade_answer(grade_state(PARTIAL_ANSWER), runtime())
    assert update["answer_grade"]["grounded"] is True and update["answer_score"] == 0.5
    assert update["best_answer"]["record"]["band"] == "tentative"
    assert update["next_action"] == "regenerate"


def test_grade_answer_retrieves_again_for_an_ungrounded_answer(install: Any, calibrator: Any) -> None:
    calibrator(constant(0.5))
    install(scripted(), strength="weak")
    update = grade_answer(grade_state(UNGROUNDED_ANSWER, retrieval_rounds=1), runtime(max_iterations=3))
    assert update["answer_grade"]["grounded"] is False and update["next_action"] == "retrieve"


def test_grade_answer_regenerates_when_retrieval_budget_is_spent(install: Any, calibrator: Any) -> None:
    calibrator(constant(0.5))
    install(scripted(), strength="weak")
    update = grade_answer(grade_state(UNGROUNDED_ANSWER, retrieval_rounds=3), runtime(max_iterations=3))
    assert update["next_action"] == "regenerate"


def test_grade_answer_gives_up_at_the_bound(install: Any, calibrator: Any) -> None:
    calibrator(constant(0.5))
    install(scripted(), strength="weak")
    update = grade_answer(grade_state(UNGROUNDED_ANSWER, generation_rounds=2), runtime(max_iterations=2))
    assert update["next_action"] == "give_up"


def test_grade_answer_accepts_answers_without_sources(install: Any) -> None:
    install(scripted(), strength="weak")
    update = grade_answer(
        {"question": "Hi", "draft": "Hello!", "sources": [], "generation_rounds": 1}, runtime()
    )
    assert update["next_action"] == "accept" and update["answer_grade"]["grader"] == "skipped"


def test_grade_answer_uses_the_llm_grader_for_strong_models(install: Any) -> None:
    reply = (
        '{"grounded": true, "answers_question": true, "relevance": 0.9, "accuracy": 1.0, '
        '"completeness": 0.8, "clarity": 0.9}'
    )
    grader = scripted(reply)
    install(scripted(), grader=grader, strength="strong")
    update = grade_answer(grade_state(GOOD_ANSWER), runtime(grader="auto"))

    assert update["answer_grade"]["grader"] == "llm"
    assert update["answer_grade"]["mean"] == pytest.approx(0.9)
    assert update["next_action"] == "accept" and update["llm_calls"] == 1
    assert "Paris is the capital of France" in grader.received[0][-1].content


def test_grade_answer_llm_garbage_falls_back_to_the_score_grade(install: Any, calibrator: Any) -> None:
    calibrator(constant(0.5))
    install(scripted(), grader=scripted("no idea", "still no idea"), strength="strong")
    update = grade_answer(grade_state(UNGROUNDED_ANSWER), runtime(grader="llm"))
    assert update["answer_grade"]["grader"] == "score"
    assert update["answer_grade"]["grounded"] is False and update["next_action"] == "retrieve"


def test_grade_answer_auto_uses_score_grader_for_weak_models(install: Any) -> None:
    install(scripted(), grader=BrokenChatModel(messages=iter([])), strength="weak")
    update = grade_answer(grade_state(GOOD_ANSWER), runtime(grader="auto"))
    assert update["answer_grade"]["grader"] == "score" and "llm_calls" not in update


# --- cite -------------------------------------------------------------------------------------------------


def test_cite_prefers_the_best_answer_with_its_own_sources() -> None:
    best = "The Eiffel Tower was completed in 1889 [1]. Paris is the capital of France [2]."
    state: State = {
        "question": QUESTION,
        "documents": [PARIS, TOWER, NOISE],
        "draft": "Bananas are rich in potassium [1].",
        "sources": [NOISE],
        "best_answer": {
            "text": best,
            "score": 0.9,
            "grounded": True,
            "round": 1,
            "doc_ids": ["chunk-2", "chunk-1"],
        },
    }
    update = cite(state, runtime())

    assert update["answer"] == best
    assert [source["chunk_id"] for source in update["sources"]] == ["chunk-2", "chunk-1"]
    assert [c["chunk_id"] for c in update["citations"]] == ["chunk-2", "chunk-1"]
    assert isinstance(update["messages"][0], AIMessage) and update["messages"][0].content == best
    assert update["unsupported_sentences"] == [] and update["not_found"] is False
    assert '<sup><a href="#source-1">[1]</a></sup>' in update["renderings"]["html"]


def test_cite_uses_the_draft_when_there_is_no_best_answer_and_infers_citations() -> None:
    state: State = {
        "question": QUESTION,
        "draft": "Paris is the capital of France.",
        "sources": [TOWER, PARIS],
    }
    update = cite(state, runtime())
    assert update["answer"] == "Paris is the capital of France [1]."
    assert update["citations"][0]["chunk_id"] == "chunk-1" and update["citations"][0]["inferred"] is True


def test_cite_chinese_answer() -> None:
    source = doc(1, "巴黎是法国的首都。", relevance=0.9)
    state: State = {"question": "法国的首都是哪里？", "draft": "法国的首都是巴黎【1】。", "sources": [source]}
    update = cite(state, runtime())
    assert update["answer"] == "法国的首都是巴黎[1]。"
    assert update["citations"][0]["confidence"] > 0.5
    assert "- [1] Doc 1 — doc1.md p.1" in update["renderings"]["markdown"]


def test_cite_empty_answer_becomes_not_found() -> None:
    update = cite({"question": QUESTION, "draft": "", "sources": []}, runtime())
    assert update["answer"] == NOT_FOUND_EN and update["not_found"] is True


def test_the_chinese_not_found_sentence_is_no_unsupported_claim() -> None:
    """The engine's own refusal states no fact: its words are in no passage, and that is no warning."""
    source = doc(1, "长城是中国古代的军事防御工程。", relevance=0.9)
    state: State = {
        "question": "长城有多长？",
        "draft": NOT_FOUND_ZH,
        "sources": [source],
        "documents": [source],
    }
    update = cite(state, runtime())
    assert update["answer"] == NOT_FOUND_ZH and update["not_found"] is True
    assert update["unsupported_sentences"] == []


# --- a small graph: the loop bound, best answer, streaming ----------------------------------------------


def answer_loop() -> Any:
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("generate", generate)
    builder.add_node("grade_answer", grade_answer)
    builder.add_node("cite", cite)
    builder.add_edge(START, "generate")
    builder.add_edge("generate", "grade_answer")
    builder.add_conditional_edges(
        "grade_answer",
        lambda state: "generate" if state["next_action"] in ("regenerate", "retrieve") else "cite",
        ["generate", "cite"],
    )
    builder.add_edge("cite", END)
    return builder.compile()


#: The tentative answer of PARTIAL_ANSWER: the sentence of PARIS that states its short answer.
PARTIAL_TENTATIVE = "Not sure \u2014 the closest the documents come is: Paris is the capital of France. [1]"


def test_loop_gives_up_at_the_bound_and_cites_the_best_answer(install: Any, calibrator: Any) -> None:
    """No draft is confident (the judgement gives 0.6, 0.4, 0.2): the loop stops at its bound and the most
    probable draft, the first, is shown as tentative."""
    calibrator(scripted_calibrator(0.6, 0.4, 0.2))
    install(scripted(PARTIAL_ANSWER, UNGROUNDED_ANSWER, "Lyon [1]"), strength="weak")
    result = answer_loop().invoke(
        {"question": QUESTION, "documents": [PARIS]},
        # patience for every attempt: the bound, not the stalled revisions, ends this loop
        context=Context(max_iterations=3, answerer="model", revision_patience=3),
    )
    assert result["generation_rounds"] == 3 and result["next_action"] == "give_up"
    assert result["answer"] == PARTIAL_TENTATIVE and result["confidence"] == 0.6
    assert result["best_answer"]["round"] == 1 and result["best_answer"]["text"] == PARTIAL_ANSWER


#: The judged probability of each draft (none confident).
PROBABILITIES = {PARTIAL_ANSWER: 0.6, UNGROUNDED_ANSWER: 0.4, "Lyon [1]": 0.2}


@pytest.mark.parametrize(
    ("drafts", "patience", "rounds"),
    [
        ((PARTIAL_ANSWER, UNGROUNDED_ANSWER, "Lyon [1]"), 0, 2),  # the first revision is worse: stop
        ((PARTIAL_ANSWER, PARTIAL_ANSWER, PARTIAL_ANSWER), 0, 2),  # a tie is no progress either
        ((PARTIAL_ANSWER, UNGROUNDED_ANSWER, "Lyon [1]"), 1, 3),  # one stalled revision allowed
        ((UNGROUNDED_ANSWER, PARTIAL_ANSWER, "Lyon [1]"), 0, 3),  # the revision improved: go on
    ],
)
def test_loop_gives_up_when_revisions_stop_improving(
    install: Any, calibrator: Any, drafts: tuple[str, ...], patience: int, rounds: int
) -> None:
    calibrator(scripted_calibrator(*(PROBABILITIES[draft] for draft in drafts)))
    install(scripted(*drafts), strength="weak")
    result = answer_loop().invoke(
        {"question": QUESTION, "documents": [PARIS]},
        context=Context(max_iterations=3, answerer="model", revision_patience=patience),
    )
    assert result["generation_rounds"] == rounds and result["next_action"] == "give_up"
    # the best attempt is cited whenever the loop stops
    assert result["best_answer"]["text"] == PARTIAL_ANSWER and result["answer"] == PARTIAL_TENTATIVE


def test_generate_tokens_stream_in_messages_mode(install: Any) -> None:
    install(scripted(GOOD_ANSWER), strength="weak")
    chunks = [
        (message, metadata)
        for message, metadata in answer_loop().stream(
            {"question": QUESTION, "documents": [PARIS]}, context=Context(), stream_mode="messages"
        )
        if metadata.get("langgraph_node") == "generate"
    ]
    assert len(chunks) > 1 and all(isinstance(message, AIMessageChunk) for message, _ in chunks)
    assert "".join(str(message.content) for message, _ in chunks) == GOOD_ANSWER


def test_a_fluent_off_topic_grade_is_not_the_loops_score(install: Any, calibrator: Any) -> None:
    """The grade of a fluent answer that does not answer the question is high; the loop's score is the
    judgement's probability, so the grade alone accepts nothing."""
    calibrator(constant(0.5))
    install(scripted(), strength="weak")
    off_topic = {
        "question": QUESTION,
        "draft": "The Eiffel Tower was completed in 1889 [1].",
        "sources": [TOWER],
    }
    update = grade_answer({**off_topic, "generation_rounds": 1}, runtime())  # type: ignore[typeddict-item]
    grade = update["answer_grade"]
    assert grade["grounded"] is True and grade["answers_question"] is False
    assert grade["mean"] >= 0.7 and update["answer_score"] == 0.5 and update["next_action"] == "regenerate"

"""The extractive answerer (retrieval.answer_span) and the short-answer shape of answers
(retrieval.answer_text): typed spans picked from invented passages, replies split into short answer and
explanation, and the node's choice between the model's short answer and the extractive one."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.draft_text import is_grounded_short_answer
from nodes.extractive import SOURCE_MODEL_EXPLANATION, explanation_short
from nodes.generate import generate
from retrieval.answer_span import answer_type, choice_options, extract_answer
from retrieval.answer_text import (
    answer_parts,
    compose_answer,
    short_answer_of,
    split_short_answer,
    supporting_sentence,
)
from state.schemas import RetrievedDoc
from tests.conftest import runtime
from tests.fakes import ScriptedChatModel, scripted

GLASSWORKS = (
    "The Orrin Glassworks was founded in 1874 by Mara Velt in the town of Kessby. "
    "It employed 312 workers at its peak."
)
KESSBY = "Kessby is a harbour town in the province of Vantor. Its mayor is Ilse Brann."
HALL = "Tamsin Hall opened in 1931."


def doc(index: int, text: str) -> RetrievedDoc:
    return RetrievedDoc(
        chunk_id=f"chunk-{index}",
        text=text,
        source=f"/corpus/doc{index}.md",
        title=f"Doc {index}",
        page=index,
        doc_id=f"doc{index}",
        score=1.0,
        relevance=0.9,
        query="",
        metadata={},
    )


LODGE = "Corven Lodge opened in 1908."


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Who founded the Orrin Glassworks?", "person"),
        ("When was the Orrin Glassworks founded?", "date"),
        ("In what year did the glassworks open?", "date"),
        ("How many workers did the glassworks employ?", "number"),
        ("Where was the Orrin Glassworks founded?", "place"),
        ("Is Kessby a harbour town?", "yes_no"),
        ("Which opened first, Tamsin Hall or Corven Lodge?", "choice"),
        ("What company did the founder of Kessby's glassworks start?", "entity"),
        ("What age did the rower who won the race retire at?", "entity"),  # "who" is a relative pronoun
        ("青石桥建于哪一年？", "date"),
        ("澄河流经几个省？", "number"),
        ("锣鼓经是什么？", "entity"),  # 什么 ends a "what" question, not a yes/no one
        ("青石桥是石桥吗？", "yes_no"),
    ],
)
def test_answer_type_follows_the_question(question: str, kind: str) -> None:
    assert answer_type(question) == kind


def test_choice_options_are_the_two_named_alternatives() -> None:
    assert choice_options("Which opened first, Tamsin Hall or the Corven Lodge?") == (
        "Tamsin Hall",
        "Corven Lodge",
    )
    assert choice_options("Who founded the Orrin Glassworks?") is None


@pytest.mark.parametrize(
    ("question", "passages", "answer", "passage"),
    [
        ("Who founded the Orrin Glassworks?", [GLASSWORKS], "Mara Velt", 0),
        ("When was the Orrin Glassworks founded?", [GLASSWORKS], "1874", 0),
        ("How many workers did the Orrin Glassworks employ at its peak?", [GLASSWORKS], "312", 0),
        ("Who is the mayor of Kessby?", [GLASSWORKS, KESSBY], "Ilse Brann", 1),
        ("Which opened first, Tamsin Hall or Corven Lodge?", [HALL, LODGE], "Corven Lodge", 1),
        ("Which opened later, Tamsin Hall or Corven Lodge?", [HALL, LODGE], "Tamsin Hall", 0),
        ("Is Kessby a harbour town?", [KESSBY], "yes", 0),
        ("Is Kessby a mining town?", ["Kessby is not a mining town; it is a harbour town."], "no", 0),
    ],
)
def test_extract_answer_picks_the_typed_span(
    question: str, passages: list[str], answer: str, passage: int
) -> None:
    span = extract_answer(question, passages)
    assert span is not None
    assert (span.text, span.passage) == (answer, passage)
    assert span.text.lower() in span.sentence.lower() or span.text in ("yes", "no")


def test_extract_answer_without_a_span_of_the_type_gives_none() -> None:
    assert extract_answer("When was the Orrin Glassworks founded?", [KESSBY]) is None
    assert extract_answer("Who founded it?", []) is None


@pytest.mark.parametrize(
    ("reply", "short", "explanation"),
    [
        (
            "Answer: Mara Velt\nExplanation: She founded it in 1874 [1].",
            "Mara Velt",
            "She founded it in 1874 [1].",
        ),
        ("Answer: 1874. Explanation: Founded in 1874 [1].", "1874", "Founded in 1874 [1]."),
        ("**Answer:** yes\nKessby is a harbour town [2].", "yes", "Kessby is a harbour town [2]."),
        ("Mara Velt founded the glassworks [1].", "", "Mara Velt founded the glassworks [1]."),
        ("Answer: " + "a very long reply " * 5 + "[1].", "", ("a very long reply " * 5).strip() + " [1]."),
        ("Sources:\nQuestion: Who founded it?\nAnswer:", "", ""),
        ("答案：1874年\n解释：玻璃厂建于1874年 [1]。", "1874年", "玻璃厂建于1874年 [1]。"),
        ("Mara Velt", "Mara Velt", ""),
        ("Explanation:\nMara Velt founded it in 1874 [1].", "", "Mara Velt founded it in 1874 [1]."),
        (
            "**Answer:**\nno\nExplanation: Kessby is a harbour town [2].",
            "no",
            "Kessby is a harbour town [2].",
        ),
        ("Mara Velt.", "Mara Velt", ""),
        ("She founded the glassworks.", "", "She founded the glassworks."),
        ("Mara Velt founded it [1]", "", "Mara Velt founded it [1]"),
        ("It was founded by Mara Velt in Kessby", "", "It was founded by Mara Velt in Kessby"),
    ],
)
def test_split_short_answer(reply: str, short: str, explanation: str) -> None:
    assert split_short_answer(reply, allow_bare=True) == (short, explanation)


def test_a_bare_phrase_is_an_answer_only_to_sources() -> None:
    assert split_short_answer("Hi there!") == ("", "Hi there!")
    assert split_short_answer("Hi there!", allow_bare=True) == ("Hi there", "")


def test_the_answer_text_starts_with_its_short_answer() -> None:
    answer = compose_answer("Mara Velt", "The glassworks was founded by Mara Velt [1].")
    assert answer == "Mara Velt\n\nThe glassworks was founded by Mara Velt [1]."
    assert short_answer_of(answer) == "Mara Velt"
    assert answer_parts(answer) == ("Mara Velt", "The glassworks was founded by Mara Velt [1].")
    sentences = "The glassworks was founded in 1874 [1]. It employed 312 workers [1]."
    assert short_answer_of(sentences) == "" and answer_parts(sentences) == ("", sentences)
    assert short_answer_of("1874 [1]") == "1874"


def test_grounded_short_answers_are_read_in_the_passages() -> None:
    passages = [doc(1, GLASSWORKS)]
    assert is_grounded_short_answer("Mara Velt", "Who founded the Orrin Glassworks?", passages)
    assert not is_grounded_short_answer("Tom Ferro", "Who founded the Orrin Glassworks?", passages)
    assert not is_grounded_short_answer("Orrin Glassworks", "Who founded the Orrin Glassworks?", passages)
    assert is_grounded_short_answer("no", "Is Kessby a harbour town?", passages)
    assert not is_grounded_short_answer("Kessby", "Is Kessby a harbour town?", passages)
    assert not is_grounded_short_answer("", "Who founded the Orrin Glassworks?", passages)


QUESTION = "Who founded the Orrin Glassworks?"


def test_a_grounded_model_short_answer_is_kept(install: Any) -> None:
    install(scripted("Answer: Mara Velt\nExplanation: Mara Velt founded it in 1874 [1]."))
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime())
    assert update["draft"] == "Mara Velt\n\nMara Velt founded it in 1874 [1]."
    assert update["prompt_info"]["short_answer_source"] == "model"


def test_an_ungrounded_model_short_answer_is_replaced_by_the_extractive_one(install: Any) -> None:
    install(scripted("Answer: Tom Ferro\nExplanation: Tom Ferro founded it [1]."))
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime())
    assert update["draft"] == f"Mara Velt\n\n{GLASSWORKS.split('. ')[0]}. [1]"
    assert update["prompt_info"]["short_answer_source"] == "extractive"
    assert update["prompt_info"]["model_short_answer"] == "Tom Ferro"


def test_an_explanation_without_answer_line_gives_the_short_answer_it_names(install: Any) -> None:
    """The small model often writes only an explanation: its own answer, if the passages hold it, stays (with
    the explanation) instead of the span the passages' vote would pick from another sentence."""
    first = doc(1, "The Orrin Glassworks was founded, according to Tom Ferro, in 1874.")
    second = doc(2, "Mara Velt started the glassworks in Kessby.")
    documents = [first, second]
    vote = extract_answer(QUESTION, [first["text"], second["text"]])
    assert vote is not None and vote.text == "Tom Ferro"  # what the passages' vote alone would answer
    install(scripted("Explanation:\nMara Velt started the glassworks in Kessby [2]."))
    update = generate({"question": QUESTION, "documents": documents}, runtime())
    assert update["draft"] == "Mara Velt\n\nMara Velt started the glassworks in Kessby [2]."
    assert update["prompt_info"]["short_answer_source"] == SOURCE_MODEL_EXPLANATION


def test_an_explanation_naming_no_grounded_answer_is_replaced_by_the_extractive_draft(install: Any) -> None:
    install(scripted("Explanation:\nThe glassworks was founded by Orla Brennan [1]."))
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime())
    assert update["draft"].startswith("Mara Velt\n\n") and "Orla Brennan" not in update["draft"]
    assert update["prompt_info"]["short_answer_source"] == "extractive"
    passages = [doc(1, GLASSWORKS)]
    assert explanation_short(QUESTION, "It was founded long ago.", passages) == ""
    assert explanation_short(QUESTION, "It was founded by Mara Velt [1].", passages) == "Mara Velt"


def test_the_supporting_sentence_states_the_answer_and_fits_the_question() -> None:
    passages = [KESSBY, GLASSWORKS, "Mara Velt later moved to Vantor."]
    found = supporting_sentence("Mara Velt", "Who founded the Orrin Glassworks?", passages)
    assert found == (1, "The Orrin Glassworks was founded in 1874 by Mara Velt in the town of Kessby.")
    assert supporting_sentence("Tom Ferro", "Who founded the Orrin Glassworks?", passages) is None


def test_a_bare_model_answer_gets_the_sentence_that_states_it(install: Any) -> None:
    """A model that replies only "Mara Velt" (no template) keeps its answer, explained by the source."""
    install(scripted("Mara Velt"))
    documents = [doc(1, KESSBY), doc(2, GLASSWORKS)]
    update = generate({"question": QUESTION, "documents": documents}, runtime())
    sentence = GLASSWORKS.split(" It ")[0]
    assert update["draft"] == f"Mara Velt\n\n{sentence} [2]"
    assert update["prompt_info"]["short_answer_source"] == "model"
    assert [source["chunk_id"] for source in update["sources"]] == ["chunk-1", "chunk-2"]


def test_a_bare_answer_not_in_the_sources_is_not_kept(install: Any) -> None:
    install(scripted("Tom Ferro"))
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime())
    assert update["draft"].startswith("Mara Velt\n\n") and "Tom Ferro" not in update["draft"]
    assert update["prompt_info"]["short_answer_source"] == "extractive"


def test_answerer_model_keeps_the_model_answer_and_extractive_calls_no_model(install: Any) -> None:
    install(scripted("Answer: Tom Ferro\nExplanation: Tom Ferro founded it [1]."))
    documents = [doc(1, GLASSWORKS)]
    update = generate({"question": QUESTION, "documents": documents}, runtime(answerer="model"))
    assert update["draft"] == "Tom Ferro\n\nTom Ferro founded it [1]."

    model = scripted("Answer: Tom Ferro")
    install(model)
    update = generate({"question": QUESTION, "documents": documents}, runtime(answerer="extractive"))
    assert update["draft"].startswith("Mara Velt\n\n") and model.received == []
    assert "llm_calls" not in update


def test_the_answer_prompt_stops_before_a_new_example(install: Any) -> None:
    """The embedded model continues the few-shot pattern unless stopped; the stop sequences reach it."""
    from nodes.model_draft import with_stop
    from prompts.answer import ANSWER_STOP_SEQUENCES

    class Stoppable(ScriptedChatModel):
        stop: list[str] | None = None

    model = Stoppable(messages=iter([]))
    assert with_stop(model, ANSWER_STOP_SEQUENCES).stop == list(ANSWER_STOP_SEQUENCES)
    assert "\nQuestion:" in ANSWER_STOP_SEQUENCES


# --- JSON-schema answer decoding ---------------------------------------------------------------------------

JSON_REPLY = '{"answer": "Mara Velt", "explanation": "Mara Velt founded it in 1874 [1]."}'


def test_a_json_schema_answer_becomes_the_two_part_draft(install: Any) -> None:
    model = scripted(JSON_REPLY)
    install(model)
    context = runtime(answer_decoding="json_schema")
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, context)
    assert update["draft"] == "Mara Velt\n\nMara Velt founded it in 1874 [1]."
    assert update["prompt_info"]["short_answer_source"] == "model" and update["llm_calls"] == 1
    assert "answer" in model.received[0][-1].text  # the fake gets the JSON request in its prompt


def test_an_unusable_json_answer_falls_back_to_the_extractive_draft(install: Any) -> None:
    install(scripted("no json here", "still none"))
    update = generate(
        {"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime(answer_decoding="json_schema")
    )
    assert update["draft"].startswith("Mara Velt\n\n") and update["llm_calls"] == 2
    assert update["prompt_info"]["generation_fallback"].startswith("model error")


def test_auto_decoding_asks_json_of_weak_models_whose_endpoint_takes_a_schema(install: Any) -> None:
    from nodes.model_draft import uses_json_schema
    from state.context import Context

    auto = Context(answer_decoding="auto")
    resources = install(scripted(), strength="weak")
    assert not uses_json_schema(auto)  # an injected fake takes no schema
    resources.generator = None  # the factory's model takes a schema
    assert uses_json_schema(auto)
    assert not uses_json_schema(Context())  # the default is text (measured end to end: no better)
    resources.strengths["generate"] = "strong"
    assert not uses_json_schema(auto) and uses_json_schema(Context(answer_decoding="json_schema"))


def test_a_json_schema_answer_is_not_streamed_as_json(install: Any) -> None:
    """The JSON object's tokens stay out of LangGraph's messages stream; the text path streams as before."""
    from langgraph.graph import END, START, StateGraph

    from state.context import Context
    from state.graph_state import State

    builder = StateGraph(State, context_schema=Context)
    builder.add_node("generate", generate)
    builder.add_edge(START, "generate")
    builder.add_edge("generate", END)
    graph = builder.compile()
    state = {"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}

    def streamed(reply: str, decoding: str) -> str:
        install(scripted(reply))
        parts = graph.stream(state, context=Context(answer_decoding=decoding), stream_mode="messages")
        return "".join(str(chunk.content) for chunk, _metadata in parts)

    assert streamed(JSON_REPLY, "json_schema") == ""
    assert "Mara Velt" in streamed("Answer: Mara Velt\nExplanation: x [1].", "text")

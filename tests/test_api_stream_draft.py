"""The SSE stream tells its client when the draft it was shown is withdrawn (`draft_replaced`, before the
event that brings the replacement), and says nothing when the final answer keeps what was shown.

Two layers: runs scripted item by item (a session that yields the graph's events and tokens in a fixed order,
so each reason is produced exactly), and whole graph runs on the fake model (the draft the model streams is
then turned into the honest "not found" answer by cite, or kept).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.language_models import BaseChatModel

from config.settings import Settings
from nodes.resources import Resources
from prompts.answer import NOT_FOUND_EN
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.api.app import create_app
from service.api.draft import keeps_draft
from tests.conftest import write_corpus
from tests.fakes import StreamingTaskModel, TaskChatModel
from tests.helpers.api_server import serve_app, sse_events
from tests.helpers.calibrators import following

QUESTION = "What is the largest planet in the Solar System?"
REPLY = "Jupiter is the largest planet in the Solar System [1]."
#: What the engine makes of REPLY: the short answer on its own line, then the cited sentence.
ANSWER = "Jupiter\n\nJupiter is the largest planet in the Solar System [1]."
CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. It has 95 known moons.",
    "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees for three minutes.",
}
#: A question about a name no passage mentions: cite withdraws the model's draft for "not found".
UNKNOWN_NAME_QUESTION = "How many moons does Jupiter's neighbour Zorbulon have?"
MOONS_REPLY = "Jupiter has 95 known moons [1]."

Item = tuple[str, Any]
#: The non-token events of a one-round stream whose draft is withdrawn.
ONE_ROUND_REPLACED = ["generation_start", "draft_replaced", "generation_complete", "done"]


class ScriptedSession:
    """Stands in for graphs.runner.Session: every run yields `items` in order (events, tokens, result)."""

    def __init__(self, items: list[Item]) -> None:
        self.items = items

    def stream(self, question: str, **_kwargs: Any) -> Iterator[Item]:
        yield from self.items


def event(name: str, **data: Any) -> Item:
    return "event", {"event": name, "data": data}


def tokens(text: str) -> list[Item]:
    """`text` as the word-by-word tokens a model streams."""
    words = text.split(" ")
    return [("token", word if index == 0 else f" {word}") for index, word in enumerate(words)]


def complete(answer: str, **data: Any) -> list[Item]:
    """The run's end: generation_complete with `answer`, then the output state."""
    return [
        event("generation_complete", answer=answer, citations=[], sources=[], **data),
        ("result", {"answer": answer, "not_found": answer == NOT_FOUND_EN}),
    ]


def read_sse(client: httpx.Client, query: str) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a streamed answer to `query`."""
    return sse_events(client, {"query": query})


def scripted_events(serve: Callable[..., httpx.Client], items: list[Item]) -> list[tuple[str, Any]]:
    """The non-token events of QUESTION's stream when every run is the scripted `items`."""
    return without_tokens(read_sse(serve(TaskChatModel(), items), QUESTION))


def without_tokens(events: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(name, data) for name, data in events if name != "token"]


@pytest.fixture
def serve(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[Callable[..., httpx.Client]]:
    """`serve(model, items=None)`: a served API over the corpus with `model`; with `items`, every run is
    that scripted stream instead of the graph."""
    with ExitStack() as servers:

        def start(model: BaseChatModel, items: list[Item] | None = None) -> httpx.Client:
            resources = install(model, strength="weak")
            resources.knowledge_base = make_kb(resources.settings)
            ingest_paths(resources.knowledge_base, list(write_corpus(tmp_path / "corpus", CORPUS).values()))

            def session(_settings: Settings) -> Any:
                return ScriptedSession(items or [])

            app = create_app(resources.settings, session_factory=session if items is not None else None)
            return servers.enter_context(serve_app(app))

        yield start


# --- scripted runs: each reason exactly ---------------------------------------------------------------------


def test_a_second_round_after_shown_tokens_is_announced_before_it_starts(
    serve: Callable[..., httpx.Client],
) -> None:
    items = [
        event("generation_start", documents=1, round=1),
        *tokens("Saturn is the largest planet [1]."),
        event("generation_start", documents=1, round=2),
        *tokens(REPLY),
        *complete(ANSWER),
    ]
    events = scripted_events(serve, items)
    assert [name for name, _ in events] == [
        "generation_start",
        "draft_replaced",
        "generation_start",
        "generation_complete",
        "done",
    ]
    # the second round's draft is kept by the final answer: no second draft_replaced
    assert events[1][1] == {"round": 1, "reason": "regenerated", "answer": None}


def test_a_final_answer_that_drops_the_shown_draft_is_announced_with_its_text(
    serve: Callable[..., httpx.Client],
) -> None:
    items = [
        event("generation_start", round=1),
        *tokens("Saturn is the largest planet [1]."),
        *complete(ANSWER),
    ]
    events = scripted_events(serve, items)
    assert [name for name, _ in events] == ONE_ROUND_REPLACED
    assert events[1][1] == {"round": 1, "reason": "revised", "answer": ANSWER}


@pytest.mark.parametrize(
    ("answer", "band", "reason"),
    [
        (NOT_FOUND_EN, "not_found", "not_found"),
        # the reason follows the run's judgement, not the words of the answer
        (NOT_FOUND_EN, "tentative", "revised"),
        (
            "Not sure \u2014 the closest the documents come is: Titan orbits Saturn. [1]",
            "not_found",
            "not_found",
        ),
    ],
)
def test_a_draft_withdrawn_for_not_found_says_so(
    serve: Callable[..., httpx.Client], answer: str, band: str, reason: str
) -> None:
    items = [event("generation_start", round=1), *tokens(MOONS_REPLY), *complete(answer, band=band)]
    events = scripted_events(serve, items)
    assert [name for name, _ in events] == ONE_ROUND_REPLACED
    assert events[1][1] == {"round": 1, "reason": reason, "answer": answer}


def test_a_reformatted_draft_is_no_replacement(serve: Callable[..., httpx.Client]) -> None:
    # labels dropped, the short answer on its own line, the marker renumbered: the same words
    shown = "Answer: Jupiter\nExplanation: Jupiter is the largest planet in the Solar System [2]."
    items = [event("generation_start", round=1), *tokens(shown), *complete(ANSWER)]
    events = read_sse(serve(TaskChatModel(), items), QUESTION)
    assert "draft_replaced" not in [name for name, _ in events]
    assert "".join(data["text"] for name, data in events if name == "token") == shown


def test_an_answer_without_tokens_needs_no_replacement(serve: Callable[..., httpx.Client]) -> None:
    items = [event("generation_start", round=1), *complete(ANSWER, cache_hit=True)]
    names = [name for name, _ in read_sse(serve(TaskChatModel(), items), QUESTION)]
    assert names == ["generation_start", "generation_complete", "done"]


@pytest.mark.parametrize(
    ("shown", "answer", "kept"),
    [
        (REPLY, ANSWER, True),
        ("Jupiter is the largest", ANSWER, True),  # a prefix of the kept draft
        ("Jupiter is the largest planet in the Solar System [1]. It has rings.", ANSWER, False),
        ("%%% ###", ANSWER, False),  # garbage that was shown is withdrawn
        ("", ANSWER, True),
    ],
)
def test_what_counts_as_keeping_the_draft(shown: str, answer: str, kept: bool) -> None:
    assert keeps_draft(shown, answer) is kept


# --- whole graph runs on the fake model ---------------------------------------------------------------------


def test_a_kept_answer_streams_without_draft_replaced(serve: Callable[..., httpx.Client]) -> None:
    events = read_sse(serve(StreamingTaskModel(replies={"generate": REPLY})), QUESTION)
    names = [name for name, _ in events]
    assert "token" in names and names[-2:] == ["generation_complete", "done"]
    assert "draft_replaced" not in names
    assert "".join(data["text"] for name, data in events if name == "token") == REPLY


def test_a_draft_cite_turns_into_not_found_is_withdrawn_before_the_final_answer(
    serve: Callable[..., httpx.Client], calibrator: Any
) -> None:
    """The judgement is not confident of any draft (its question names what no passage holds): each round
    streams its draft, and the last one shown is withdrawn for "not found"."""
    calibrator(following("missing_anchors", inverted=True))  # "Zorbulon" is in no passage
    events = read_sse(serve(StreamingTaskModel(replies={"generate": MOONS_REPLY})), UNKNOWN_NAME_QUESTION)
    names = [name for name, _ in events]
    rounds = names.count("generation_start")
    assert rounds >= 1
    assert "".join(data["text"] for name, data in events if name == "token") == MOONS_REPLY * rounds
    assert names[-3:] == ["draft_replaced", "generation_complete", "done"]
    replaced, final = events[-3][1], events[-2][1]
    assert replaced == {"round": rounds, "reason": "not_found", "answer": final["answer"]}
    assert final["answer"] == NOT_FOUND_EN

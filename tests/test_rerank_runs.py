"""Rerank inside graph runs (RAG_RERANK, the run's `rerank`, the API's per-request `rerank`): every search
of the run is reordered by the generation model before grading and the answer, with fake models and the
mock retriever (no store, no embedding model).

Why the answer's prompt is checked: a rerank that reordered the search's hits but whose order a later step
(merging queries best score first, choosing the answer's sources) put back would change nothing a user
sees; the prompt the answer is written from is where the order must arrive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from config.settings import load_settings
from graphs.runner import compiled_graph
from nodes.resources import Resources, get_resources, use_resources
from service.api.app import create_app
from state.context import Context
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

QUESTION = "What colour is the garden door?"
#: Three passages the question matches about equally; the fake reranker prefers red, then green, then blue.
COLOURS = ("red", "blue", "green")
RERANK_SCORES = {"red": 9, "green": 5, "blue": 1}
RERANKED = ["red", "green", "blue"]
PASSAGES = [
    {"text": f"The garden door is painted {colour}.", "source": f"/notes/{colour}.md"} for colour in COLOURS
]


def score_by_colour(messages: list[BaseMessage]) -> str:
    """The fake reranker: reads the numbered passages of the rerank prompt, scores each by its colour."""
    lines = re.findall(r"^\[(\d+)\] .*?painted (\w+)", str(messages[-1].content), flags=re.MULTILINE)
    return "\n".join(f"[{number}] {RERANK_SCORES[colour]}" for number, colour in lines)


def prompt_colours(messages: list[BaseMessage]) -> list[str]:
    """The colours of the passages in an answer prompt, in the order the prompt shows them."""
    return re.findall(r"painted (\w+)\.", str(messages[-1].content))


@pytest.fixture
def model(tmp_path: Path) -> Iterator[TaskChatModel]:
    """A fake model installed as the process resources over the mock retriever's three passages."""
    passages = tmp_path / "passages.json"
    passages.write_text(json.dumps(PASSAGES), encoding="utf-8")
    fake = TaskChatModel(replies={"rerank": score_by_colour, "generate": "The door is green [1]."})
    settings = load_settings(data_dir=tmp_path / "rag", retriever="mock", mock_passages=passages)
    resources = Resources(
        settings, generator=fake, grader=fake, strengths={"generate": "weak", "grade": "weak"}
    )
    with use_resources(resources):
        yield fake


def ask(**context: Any) -> dict[str, Any]:
    out: dict[str, Any] = compiled_graph("rag", None).invoke(
        {"question": QUESTION}, context=Context(rewrite="none", **context)
    )
    return out


def test_the_fused_order_is_not_the_rerankers(model: TaskChatModel) -> None:
    """The premise of the next tests: without a rerank the answer's prompt shows another order, and the
    model is never asked to rerank."""
    ask(rerank=False)
    assert "rerank" not in model.tasks()
    (prompt,) = model.prompts("generate")
    shown = prompt_colours(prompt)
    assert sorted(shown) == sorted(COLOURS) and shown != RERANKED


def test_with_rerank_the_answer_prompt_follows_the_rerankers_scores(model: TaskChatModel) -> None:
    out = ask(rerank=True)
    assert model.tasks().count("rerank") == 1  # one search, one batched call
    (prompt,) = model.prompts("generate")
    assert prompt_colours(prompt) == RERANKED
    retrieved = {doc["source"]: doc for doc in out["retrieved"]}
    assert retrieved["red.md"]["score"] == pytest.approx(0.9) and retrieved["blue.md"]["score"] == 0.1
    assert "fused_score" in retrieved["red.md"]["metadata"]
    assert out["timings_ms"]["rerank"] >= 0


def test_a_rerank_reply_that_cannot_be_read_keeps_the_fused_order(model: TaskChatModel) -> None:
    ask(rerank=False)
    fused = prompt_colours(model.prompts("generate")[0])
    model.replies["rerank"] = "I cannot rank these."
    ask(rerank=True)
    assert model.tasks().count("rerank") == 1
    assert prompt_colours(model.prompts("generate")[1]) == fused


def test_rag_rerank_in_the_environment_turns_it_on(
    model: TaskChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_RERANK", "true")
    assert Context().rerank is True
    ask()
    assert model.tasks().count("rerank") == 1
    assert prompt_colours(model.prompts("generate")[0]) == RERANKED


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/api/v1/rag/query", {"query": QUESTION, "enable_query_rewriting": False}),
        ("/api/v1/rag/generate", {"query": QUESTION, "rewrite_method": "none"}),
    ],
)
def test_the_api_reranks_per_request(model: TaskChatModel, route: str, body: dict[str, Any]) -> None:
    with serve_app(create_app(get_resources().settings)) as client:
        plain = client.post(route, json=body)
        assert plain.status_code == 200, plain.text
        assert "rerank" not in model.tasks()
        reranked = client.post(route, json={**body, "rerank": True})
        refused = client.post(route, json={**body, "rerank": "sometimes"})
    assert reranked.status_code == 200, reranked.text
    assert model.tasks().count("rerank") == 1
    assert prompt_colours(model.prompts("generate")[-1]) == RERANKED
    assert refused.status_code == 422 and "rerank" in refused.text

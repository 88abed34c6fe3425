"""Feedback on answers: thumbs up / down and a comment per answer, stored on its audit row,
by `rag feedback ANSWER_ID --up|--down` and POST /api/v1/feedback, counted by `rag stats` (tables and the
API's metrics) and GET /api/v1/stats.

The tenant rule is tested as an attacker would try it: with another tenant's real answer id (which must
read exactly as an id that does not exist: no rating stored, nothing learned), with a `tenant_id` of the
victim under the attacker's key, without a key, and by reading the stats. Rows are read back with plain SQL.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from config.settings import Settings
from graphs.rag import build_graph
from persistence import feedback as feedback_module
from persistence.answer_stats import answer_stats
from persistence.audit import write_audit
from persistence.database import APP_DB_FILENAME, close_databases, get_database
from persistence.feedback import AnswerNotFoundError, InvalidFeedbackError, rate_answer
from service.cli import app as cli_app
from state.context import Context
from tests.helpers.api_server import free_port, serve
from tests.helpers.rag_world import QUESTION, World, world

KEYS = "key-acme:acme,key-globex:globex"
ACME = {"X-API-Key": "key-acme"}
GLOBEX = {"X-API-Key": "key-globex"}


@pytest.fixture
def env(make_settings: Any, make_kb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """Two tenants' documents, the fake model, API keys, comments of at most 100 characters."""
    monkeypatch.setattr(feedback_module, "FEEDBACK_MAX_COMMENT_CHARS", 100)
    settings: Settings = make_settings(api_keys=KEYS)
    with world(settings, make_kb(settings), tmp_path, tenants=("acme", "globex")) as built:
        yield built


def ask(tenant: str) -> str:
    """Answer the question for `tenant` through the graph; the answer's id."""
    out = build_graph().invoke({"question": QUESTION}, context=Context(tenant=tenant))
    assert out["answer_id"]
    return str(out["answer_id"])


def feedback_row(world_: World, answer_id: str) -> dict[str, Any]:
    with sqlite3.connect(world_.settings.data_dir / APP_DB_FILENAME) as connection:
        connection.row_factory = sqlite3.Row
        query = "SELECT tenant, feedback, feedback_comment, feedback_user_id, feedback_at FROM audit_logs "
        return dict(connection.execute(query + "WHERE answer_id = ?", (answer_id,)).fetchone())


def unknown_id() -> str:
    return uuid.uuid4().hex


# --- persistence.feedback --------------------------------------------------------------------------------


def test_a_rating_is_stored_on_the_answers_row_and_a_new_one_replaces_it(env: World) -> None:
    answer = ask("acme")
    first = rate_answer(answer, "up", tenant="acme", comment="  clear and cited ", user_id="ann")
    assert (first.rating, first.comment, first.replaced) == ("up", "clear and cited", None)
    row = feedback_row(env, answer)
    assert (row["tenant"], row["feedback"], row["feedback_comment"], row["feedback_user_id"]) == (
        "acme",
        "up",
        "clear and cited",
        "ann",
    )
    assert row["feedback_at"]
    second = rate_answer(answer, "down", tenant="acme")
    assert second.replaced == "up"
    assert (feedback_row(env, answer)["feedback"], feedback_row(env, answer)["feedback_comment"]) == (
        "down",
        None,
    )


def test_another_tenants_answer_reads_as_one_that_does_not_exist(env: World) -> None:
    victim = ask("acme")
    stranger = unknown_id()
    errors = []
    for answer_id in (victim, stranger):
        with pytest.raises(AnswerNotFoundError) as raised:
            rate_answer(answer_id, "down", tenant="globex", comment="spam")
        errors.append(str(raised.value).replace(answer_id, "ID"))
    assert errors[0] == errors[1] == "answer_id: no answer 'ID' for tenant 'globex'"
    assert feedback_row(env, victim)["feedback"] is None  # nothing stored on the victim's answer


def test_only_answers_can_be_rated(env: World) -> None:
    write_audit("memory_add", tenant="acme", detail={"memory_ids": [1]})
    with pytest.raises(AnswerNotFoundError):
        rate_answer("1", "up", tenant="acme")


@pytest.mark.parametrize(
    ("answer_id", "rating", "comment", "field"),
    [
        ("ok", "sideways", "", "rating"),
        ("ok", "UP", "", "rating"),
        ("ok", "up", "x" * 101, "comment"),
        ("ok", "up", "bad\x00byte", "comment"),
        ("", "up", "", "answer_id"),
        ("../../etc", "up", "", "answer_id"),
        ("a" * 65, "up", "", "answer_id"),
    ],
)
def test_bad_feedback_is_one_line_naming_the_field(
    env: World, answer_id: str, rating: str, comment: str, field: str
) -> None:
    with pytest.raises(InvalidFeedbackError) as raised:
        rate_answer(answer_id, rating, tenant="acme", comment=comment, settings=env.settings)
    message = str(raised.value)
    assert message.startswith(f"{field}: ") and "\n" not in message and len(message) < 200


def test_stats_count_the_feedback(env: World) -> None:
    up, down, unrated = ask("acme"), ask("acme"), ask("acme")
    rate_answer(up, "up", tenant="acme", comment="great")
    rate_answer(down, "down", tenant="acme")
    rate_answer(ask("globex"), "down", tenant="globex", comment="wrong")
    acme = answer_stats(get_database(env.settings), tenant="acme")
    assert acme["answers"] == 3 and acme["feedback"] == {"up": 1, "down": 1, "comments": 1}
    (strategy,) = acme["strategies"].values()
    assert (strategy["feedback_up"], strategy["feedback_down"]) == (1, 1)
    assert answer_stats(get_database(env.settings))["feedback"] == {"up": 1, "down": 2, "comments": 2}
    assert unrated not in (up, down)


# --- rag feedback ----------------------------------------------------------------------------------------


def rag(world_: World, *arguments: str) -> Any:
    close_databases()  # the CLI opens the tables as a process of its own would
    env = {
        "RAG_DATA_DIR": str(world_.settings.data_dir),
        "RAG_API_PORT": str(free_port()),
    }
    return CliRunner().invoke(cli_app, list(arguments), env=env)


def test_rag_feedback_rates_the_answer_rag_ask_printed(env: World) -> None:
    asked = rag(env, "ask", QUESTION, "--tenant", "acme", "--json")
    assert asked.exit_code == 0, asked.output
    answer = json.loads(asked.stdout)["answer_id"]
    shown = rag(env, "ask", QUESTION, "--tenant", "acme")
    assert "answer " in shown.stdout  # the plain output names the id too

    rated = rag(env, "feedback", answer, "--up", "--comment", "spot on", "--tenant", "acme", "--json")
    assert rated.exit_code == 0, rated.output
    assert json.loads(rated.stdout) | {"rated_at": None} == {
        "answer_id": answer,
        "tenant_id": "acme",
        "rating": "up",
        "comment": "spot on",
        "user_id": "",
        "rated_at": None,
        "replaced": None,
    }
    again = rag(env, "feedback", answer, "--down", "--tenant", "acme")
    assert again.exit_code == 0 and f"answer {answer} rated down (replaces up)" in again.stdout
    figures = json.loads(rag(env, "stats", "--tenant", "acme", "--json").stdout)
    assert figures["feedback"] == {"up": 0, "down": 1, "comments": 0}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--up", "--down"), "exactly one of --up or --down"),
        ((), "exactly one of --up or --down"),
        (("--up", "--tenant", "globex"), "answer_id: no answer"),  # acme's answer, asked as globex
        (("--up", "--comment", "x" * 101, "--tenant", "acme"), "comment: at most 100 characters"),
        (("--up", "--comment", "tab\tok but bell\a", "--tenant", "acme"), "comment: control characters"),
    ],
)
def test_rag_feedback_bad_input_is_one_line(env: World, arguments: tuple[str, ...], message: str) -> None:
    answer = ask("acme")
    result = rag(env, "feedback", answer, *arguments)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert feedback_row(env, answer)["feedback"] is None


def test_rag_feedback_of_an_unknown_id(env: World) -> None:
    result = rag(env, "feedback", unknown_id(), "--up", "--tenant", "acme")
    assert result.exit_code == 2 and "answer_id: no answer" in result.stderr


# --- POST /api/v1/feedback, GET /api/v1/stats, through a real server --------------------------------------


def test_feedback_route_through_the_server_as_an_attacker_would_try_it(env: World) -> None:
    with serve(env.settings) as client:
        reply = client.post("/api/v1/rag/generate", json={"query": QUESTION}, headers=ACME)
        assert reply.status_code == 200, reply.text
        answer = reply.json()["answer_id"]
        seed = client.post("/api/v1/rag/query", json={"query": QUESTION}, headers=ACME).json()
        assert seed["metadata"]["answer_id"] not in (None, answer)

        def rate(headers: dict[str, str], **body: Any) -> Any:
            return client.post("/api/v1/feedback", json={"rating": "down", **body}, headers=headers)

        # globex with acme's real answer id: the same 404 as an id nobody has, nothing stored
        stolen, unknown = rate(GLOBEX, answer_id=answer), rate(GLOBEX, answer_id="f" * 32)
        assert stolen.status_code == unknown.status_code == 404
        assert stolen.json()["message"].replace(answer, "ID") == unknown.json()["message"].replace(
            "f" * 32, "ID"
        )
        assert rate(GLOBEX, answer_id=answer, tenant_id="acme").status_code == 403
        assert rate({}, answer_id=answer).status_code == 401
        assert feedback_row(env, answer)["feedback"] is None

        ok = rate(ACME, answer_id=answer, rating="up", comment="clear", user_id="ann")
        assert ok.status_code == 200, ok.text
        assert {
            key: ok.json()[key] for key in ("answer_id", "tenant_id", "rating", "comment", "user_id")
        } == {
            "answer_id": answer,
            "tenant_id": "acme",
            "rating": "up",
            "comment": "clear",
            "user_id": "ann",
        }
        for body, field in (
            ({"answer_id": answer, "rating": "meh"}, "rating"),
            ({"answer_id": answer, "rating": "up", "comment": "x" * 101}, "comment"),
            ({"answer_id": "../etc", "rating": "up"}, "answer_id"),
            ({"rating": "up"}, "answer_id"),
        ):
            bad = client.post("/api/v1/feedback", json=body, headers=ACME)
            assert bad.status_code == 422 and bad.json()["field"] == field, bad.text

        mine = client.get("/api/v1/stats", headers=ACME).json()
        assert mine["tenant_id"] == "acme" and mine["answers"] == 2
        assert mine["feedback"] == {"up": 1, "down": 0, "comments": 1}
        theirs = client.get("/api/v1/stats", headers=GLOBEX).json()
        assert theirs["answers"] == 0 and theirs["feedback"] == {"up": 0, "down": 0, "comments": 0}
        assert client.get("/api/v1/stats", params={"tenant_id": "acme"}, headers=GLOBEX).status_code == 403

        metrics = client.get("/metrics").text
        assert 'rag_feedback_total{rating="up"} 1.0' in metrics and 'rating="down"' not in metrics
        env_vars = {"RAG_DATA_DIR": str(env.settings.data_dir)}
        shown = CliRunner().invoke(cli_app, ["stats", "--url", str(client.base_url), "--json"], env=env_vars)
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["feedback"] == {"up": 1.0}
    assert feedback_row(env, answer)["feedback"] == "up"

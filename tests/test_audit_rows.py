"""persistence.audit's turn writer (record_turn_rows) on its own: the rows a turn leaves, a thread's turns
counted on one session row, and a session row created by a concurrent writer between our lookup and our
insert (the unique constraint's path), without a graph or a model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, insert, text

from persistence.audit import ANSWER_ACTION, TurnRecord, record_turn_rows
from persistence.database import Database, SessionRow, open_database, utcnow


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    opened = open_database(f"sqlite:///{tmp_path / 'app.sqlite'}")
    yield opened
    opened.close()


def table(database: Database, sql: str) -> list[dict[str, Any]]:
    with database.engine.connect() as connection:
        return [dict(row._mapping) for row in connection.execute(text(sql))]


def turn(question: str = "Which planet is largest?", **fields: Any) -> TurnRecord:
    values: dict[str, Any] = {
        "tenant": "acme",
        "thread_id": "t1",
        "question": question,
        "answer": "Jupiter [1].",
    }
    return TurnRecord(**(values | fields))


def test_a_turn_writes_its_session_both_messages_and_the_audit_row(database: Database) -> None:
    record = turn(
        conversation_id="conv", user_id="ana", source_ids=["c1", "c2"], mode="rag", strategy="hybrid",
        latency_ms=12.5, cache_hit=False, not_found=False, interface="cli", graph="rag", error="late",
        confidence=0.75, model="m1", prompt_tokens=30, completion_tokens=4,
    )  # fmt: skip
    answer_id = record_turn_rows(record, database)
    (session,) = table(database, "SELECT * FROM sessions")
    assert (session["tenant"], session["thread_id"], session["user_id"]) == ("acme", "t1", "ana")
    assert (session["conversation_id"], session["interface"], session["turns"]) == ("conv", "cli", 1)
    assert session["created_at"] and session["updated_at"]
    user, assistant = table(database, "SELECT * FROM conversations ORDER BY id")
    for row in (user, assistant):
        assert (row["session_id"], row["tenant"], row["user_id"], row["turn_id"]) == (
            session["id"], "acme", "ana", answer_id,
        )  # fmt: skip
        assert (row["mode"], row["strategy"]) == ("rag", "hybrid") and row["created_at"]
    assert (user["role"], user["content"], user["source_ids"], user["latency_ms"]) == (
        "user", "Which planet is largest?", "[]", None,
    )  # fmt: skip
    assert (user["cache_hit"], user["not_found"]) == (0, 0)
    assert (assistant["role"], assistant["content"], assistant["source_ids"]) == (
        "assistant", "Jupiter [1].", '["c1","c2"]',
    )  # fmt: skip
    assert (assistant["latency_ms"], assistant["cache_hit"], assistant["not_found"]) == (12.5, 0, 0)
    (audit,) = table(database, "SELECT * FROM audit_logs")
    expected = {
        "action": ANSWER_ACTION, "tenant": "acme", "user_id": "ana", "thread_id": "t1",
        "conversation_id": "conv", "chunk_ids": '["c1","c2"]', "mode": "rag", "interface": "cli",
        "graph": "rag", "cache_hit": 0, "not_found": 0, "latency_ms": 12.5, "answer_id": answer_id,
        "strategy": "hybrid", "confidence": 0.75, "model": "m1", "prompt_tokens": 30, "completion_tokens": 4,
        "detail": f'{{"turn_id":"{answer_id}","strategy":"hybrid","error":"late"}}',
    }  # fmt: skip
    assert {key: audit[key] for key in expected} == expected and audit["created_at"]


def test_unsaid_fields_are_stored_as_unknown(database: Database) -> None:
    record_turn_rows(turn(cache_hit=True, not_found=True), database)
    (audit,) = table(database, "SELECT * FROM audit_logs")
    assert [audit[key] for key in ("strategy", "model", "confidence", "prompt_tokens")] == [None] * 4
    assert (audit["cache_hit"], audit["not_found"]) == (1, 1)
    assert '"error"' not in audit["detail"]
    assert [row["cache_hit"] for row in table(database, "SELECT * FROM conversations ORDER BY id")] == [0, 1]


def test_a_threads_turns_are_counted_on_one_session_row(database: Database) -> None:
    first = record_turn_rows(turn("one?"), database)
    second = record_turn_rows(turn("two?"), database)
    record_turn_rows(turn("other?", thread_id="t2"), database)
    sessions = table(database, "SELECT * FROM sessions ORDER BY id")
    assert [(row["thread_id"], row["turns"]) for row in sessions] == [("t1", 2), ("t2", 1)]
    assert sessions[0]["updated_at"] >= sessions[0]["created_at"]
    rows = table(database, "SELECT * FROM conversations ORDER BY id")
    assert [(row["role"], row["content"], row["turn_id"]) for row in rows[:4]] == [
        ("user", "one?", first), ("assistant", "Jupiter [1].", first),
        ("user", "two?", second), ("assistant", "Jupiter [1].", second),
    ]  # fmt: skip
    assert {row["session_id"] for row in rows[:4]} == {sessions[0]["id"]}
    assert rows[4]["session_id"] == sessions[1]["id"] and first != second


def test_a_session_row_created_concurrently_is_reused(database: Database) -> None:
    """Another writer creates the thread's session row after our lookup found none: our insert meets the
    unique constraint, and the turn is counted on the other writer's row instead of failing."""
    created: list[int] = []

    def create_after_lookup(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if not created and statement.lstrip().upper().startswith("SELECT") and "FROM sessions" in statement:
            with database.engine.begin() as other:
                values = {"tenant": "acme", "thread_id": "t1", "turns": 3, "created_at": utcnow()}
                created.append(
                    other.execute(insert(SessionRow).values(updated_at=utcnow(), **values)).lastrowid
                )

    event.listen(database.engine, "after_cursor_execute", create_after_lookup)
    try:
        answer_id = record_turn_rows(turn(), database)
    finally:
        event.remove(database.engine, "after_cursor_execute", create_after_lookup)
    (session,) = table(database, "SELECT * FROM sessions")
    assert created == [session["id"]] and session["turns"] == 4
    rows = table(database, "SELECT * FROM conversations ORDER BY id")
    assert [(row["session_id"], row["turn_id"]) for row in rows] == [(session["id"], answer_id)] * 2
    assert [row["answer_id"] for row in table(database, "SELECT * FROM audit_logs")] == [answer_id]

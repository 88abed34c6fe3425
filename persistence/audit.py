"""Writing what happened into the app tables: a turn (session, the two conversation rows, an audit row) in one
transaction, so a reader never sees a question without its answer, and audit rows for memory changes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from persistence.database import (
    AuditLogRow,
    ConversationRow,
    Database,
    SessionRow,
    get_database,
    to_json,
    utcnow,
)

#: The audit action of an answer (the other actions are memory changes).
ANSWER_ACTION = "answer"


@dataclass(frozen=True)
class TurnRecord:
    """One answered question, as the tables keep it."""

    tenant: str
    thread_id: str
    question: str
    answer: str
    conversation_id: str = ""
    user_id: str = ""
    """Who asked (the run's context `user_id`); '' when not said."""
    source_ids: list[str] = field(default_factory=list)
    """Chunk ids of the passages the answer cites."""
    mode: str = ""
    strategy: str = ""
    latency_ms: float | None = None
    cache_hit: bool = False
    not_found: bool = False
    interface: str = ""
    """Who asked: cli, api, langgraph-server, python (from the run's config metadata)."""
    graph: str = ""
    error: str = ""
    confidence: float | None = None
    """The answer's calibrated confidence (state `confidence`, 0-1); None when none was judged."""
    model: str = ""
    """The generation model the run was configured with ('' = not said)."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


#: The statements of a turn, built once: the turn writes plain rows through SQLAlchemy Core rather than ORM
#: objects, whose per-object bookkeeping (identity map, flush order, attribute history) was most of the
#: turn's write time; the rows and the one transaction are the same.
_SESSION_ID = select(SessionRow.id).where(
    SessionRow.tenant == bindparam("tenant"), SessionRow.thread_id == bindparam("thread_id")
)
_INSERT_SESSION = insert(SessionRow).returning(SessionRow.id)
_COUNT_TURN = (
    update(SessionRow)
    .where(SessionRow.id == bindparam("session_id"))
    .values(turns=SessionRow.turns + 1, updated_at=bindparam("now"))
)
_INSERT_CONVERSATION = insert(ConversationRow)
_INSERT_AUDIT = insert(AuditLogRow)


def _session_id(connection: Connection, record: TurnRecord) -> int:
    """The id of the thread's session row with this turn counted: the row is created by the thread's first
    turn (a concurrent creator wins, and we count our turn on its row)."""
    keys = {"tenant": record.tenant, "thread_id": record.thread_id}
    now = utcnow()
    found = connection.scalar(_SESSION_ID, keys)
    if found is None:
        row = {
            **keys,
            "user_id": record.user_id,
            "conversation_id": record.conversation_id,
            "interface": record.interface,
            "turns": 1,
            "created_at": now,
            "updated_at": now,
        }
        try:
            with connection.begin_nested():
                return int(connection.execute(_INSERT_SESSION, row).scalar_one())
        except IntegrityError:
            found = connection.execute(_SESSION_ID, keys).scalar_one()
    connection.execute(_COUNT_TURN, {"session_id": found, "now": now})
    return int(found)


def record_turn_rows(record: TurnRecord, database: Database | None = None) -> str:
    """Write the turn: upsert its session, add the user and assistant rows and the audit row; return the
    turn id that links the two conversation rows, which is also the answer's id (`answer_id` of the audit
    row: what a caller rates the answer by)."""
    database = database or get_database()
    turn_id = uuid.uuid4().hex
    sources = to_json(list(record.source_ids))
    detail = {"turn_id": turn_id, "strategy": record.strategy}
    if record.error:
        detail["error"] = record.error
    with database.engine.begin() as connection:
        common: dict[str, Any] = {
            "session_id": _session_id(connection, record),
            "tenant": record.tenant,
            "user_id": record.user_id,
            "turn_id": turn_id,
            "mode": record.mode,
            "strategy": record.strategy,
        }
        question = {"role": "user", "content": record.question, "source_ids": "[]", "latency_ms": None}
        answer: dict[str, Any] = {"role": "assistant", "content": record.answer, "source_ids": sources}
        answer["latency_ms"] = record.latency_ms
        flags = {"cache_hit": record.cache_hit, "not_found": record.not_found}
        # both rows in one executemany, the question first (its id is below the answer's, as readers sort)
        connection.execute(
            _INSERT_CONVERSATION,
            [common | question | {"cache_hit": False, "not_found": False}, common | answer | flags],
        )
        connection.execute(
            _INSERT_AUDIT,
            {
                "action": ANSWER_ACTION,
                "tenant": record.tenant,
                "user_id": record.user_id,
                "thread_id": record.thread_id,
                "conversation_id": record.conversation_id,
                "chunk_ids": sources,
                "mode": record.mode,
                "interface": record.interface,
                "graph": record.graph,
                "cache_hit": record.cache_hit,
                "not_found": record.not_found,
                "latency_ms": record.latency_ms,
                "detail": to_json(detail),
                "answer_id": turn_id,
                "strategy": record.strategy or None,
                "confidence": record.confidence,
                "model": record.model or None,
                "prompt_tokens": record.prompt_tokens,
                "completion_tokens": record.completion_tokens,
            },
        )
    return turn_id


def write_audit(
    action: str,
    *,
    tenant: str,
    database: Database | None = None,
    conversation_id: str = "",
    interface: str = "",
    user_id: str = "",
    detail: dict[str, Any] | None = None,
) -> None:
    """One audit row for an action other than an answer (memory_add, memory_delete, ...)."""
    database = database or get_database()
    with database.session() as session:
        session.add(
            AuditLogRow(
                action=action,
                tenant=tenant,
                user_id=user_id,
                conversation_id=conversation_id,
                interface=interface,
                detail=to_json(detail or {}),
            )
        )

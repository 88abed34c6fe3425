"""The engine's SQL tables (SQLAlchemy 2 ORM): sessions, conversations, memories, audit_logs and the
semantic cache's table, in `<data_dir>/app.sqlite` or any database of RAG_DATABASE_URL.

Apart from the catalog: these rows describe use, not the index, and may live in a shared server database.
Alembic migrations (persistence/migrations) own the schema; the first use runs `upgrade head`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock
from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from config.settings import Settings
from persistence.errors import StoreUnavailableError
from persistence.sqlite_engine import configure_sqlite
from persistence.urls import is_postgres as is_postgres
from persistence.urls import libpq_url as libpq_url
from persistence.urls import postgres_url as postgres_url
from persistence.urls import sqlalchemy_url

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

logger = logging.getLogger(__name__)

#: File of the default SQLite database inside the data folder.
APP_DB_FILENAME = "app.sqlite"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: Lock file beside a SQLite database, held while its migrations run.
MIGRATION_LOCK_SUFFIX = ".migrate-lock"
#: Key of the Postgres advisory lock held while the app tables' migrations run.
MIGRATION_ADVISORY_LOCK_KEY = 0x7261675F6D696772  # "rag_migr"
#: Resolved SQLite URLs kept per (data folder, working directory): database_url runs for every table access,
#: and Path.resolve() makes a system call per path part.
RESOLVED_URL_CACHE_SIZE = 64
#: Seconds to wait for a database server by default (RAG_DATABASE_CONNECT_TIMEOUT_S in the settings).
DEFAULT_CONNECT_TIMEOUT_S = 10.0


class DatabaseUnavailableError(StoreUnavailableError):
    """The app database cannot be opened or migrated (server down, unwritable file): exit 1 / HTTP 503, like
    every store that cannot be used (the CLI's and the API's shared error handling)."""


class InvalidDatabaseUrlError(ValueError):
    """RAG_DATABASE_URL is not a URL SQLAlchemy can use (malformed, unknown dialect or driver): a bad
    setting, so bad input (exit 2), not a database that is down."""


def utcnow() -> datetime:
    """Timestamps are stored in UTC."""
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """A stored timestamp as an aware UTC datetime: SQLite hands `DateTime(timezone=True)` values back
    naive (it has no time zone type), other databases aware; readers must not see the difference."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base of the app tables (its metadata is what the migrations must produce)."""


class SessionRow(Base):
    """One conversation thread of a tenant (the LangGraph thread id), created by its first recorded turn."""

    __tablename__ = "sessions"
    __table_args__ = (UniqueConstraint("tenant", "thread_id", name="uq_sessions_tenant_thread"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant: Mapped[str] = mapped_column(String(128), nullable=False)
    user_id: Mapped[str] = mapped_column(String(128), nullable=False, default="", server_default="")
    """Who asked (the run's context `user_id`; '' = not said), beside the tenant (revision 0003)."""
    thread_id: Mapped[str] = mapped_column(String(128), nullable=False)
    conversation_id: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    interface: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    turns: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class ConversationRow(Base):
    """One message of a turn: the user's question or the assistant's answer (with what it rests on)."""

    __tablename__ = "conversations"
    __table_args__ = (Index("ix_conversations_session", "session_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False
    )
    tenant: Mapped[str] = mapped_column(String(128), nullable=False, index=True)
    user_id: Mapped[str] = mapped_column(String(128), nullable=False, default="", server_default="")
    """Who asked (the run's context `user_id`; '' = not said), beside the tenant (revision 0003)."""
    turn_id: Mapped[str] = mapped_column(String(64), nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    """'user' or 'assistant'."""
    content: Mapped[str] = mapped_column(Text, nullable=False)
    mode: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    strategy: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    source_ids: Mapped[str] = mapped_column(Text, nullable=False, default="[]")
    """JSON list of the chunk ids the answer cites (assistant rows)."""
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    cache_hit: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    not_found: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class MemoryRow(Base):
    """The memories table of earlier releases, only read to copy its rows into the long-term store
    (persistence.memory_migration)."""

    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_scope", "tenant", "conversation_id"),
        Index("uq_memories_tenant_public_id", "tenant", "public_id", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    """Internal key (order of creation); never shown: one sequence over every tenant, reused after deletes."""
    public_id: Mapped[str] = mapped_column(String(32), nullable=False)
    """The id callers see and pass (revision 0006): 16 random hex digits, unique within the tenant."""
    tenant: Mapped[str] = mapped_column(String(128), nullable=False)
    conversation_id: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    kind: Mapped[str] = mapped_column(String(64), nullable=False, default="note")
    content: Mapped[str] = mapped_column(Text, nullable=False)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    """float32 vector of `content` by the knowledge base's embedding model `model_key`."""
    model_key: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    metadata_json: Mapped[str] = mapped_column(Text, nullable=False, default="{}", server_default="{}")
    """JSON object of the caller's metadata (source, tags...), returned as given (revision 0002)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class AuditLogRow(Base):
    """Who did what, when: one row per answer (and per memory change), with the chunks an answer used."""

    __tablename__ = "audit_logs"
    __table_args__ = (
        Index("ix_audit_tenant_time", "tenant", "created_at"),
        Index("ix_audit_answer_id", "answer_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    action: Mapped[str] = mapped_column(String(32), nullable=False)
    tenant: Mapped[str] = mapped_column(String(128), nullable=False)
    user_id: Mapped[str] = mapped_column(String(128), nullable=False, default="", server_default="")
    """Who asked (the run's context `user_id`; '' = not said), beside the tenant (revision 0003)."""
    thread_id: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    conversation_id: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    chunk_ids: Mapped[str] = mapped_column(Text, nullable=False, default="[]")
    """JSON list of chunk ids (the answer's sources)."""
    mode: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    interface: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    graph: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    cache_hit: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    not_found: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    detail: Mapped[str] = mapped_column(Text, nullable=False, default="{}")
    """JSON object of extra facts (strategy, error, memory ids...)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    # Revision 0004: what `rag stats` reports per answer (NULL on older rows and other actions = unknown).
    answer_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The answer's id (the turn id of its conversation rows), returned to the caller to rate it."""
    strategy: Mapped[str | None] = mapped_column(String(32), nullable=True)
    confidence: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The answer's confidence (mean token log-probability of its short answer); NULL when none measured."""
    model: Mapped[str | None] = mapped_column(String(128), nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Revision 0005: the users' feedback on the answer (persistence.feedback; NULL = not rated).
    feedback: Mapped[str | None] = mapped_column(String(8), nullable=True)
    """'up' or 'down'; a later rating replaces it."""
    feedback_comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    feedback_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    feedback_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class CacheEntryRow(Base):
    """A cached answer of the semantic cache's SQL backend (persistence.semantic_cache)."""

    __tablename__ = "semantic_cache"
    __table_args__ = (Index("ix_semantic_cache_scope", "tenant", "scope", "docs_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant: Mapped[str] = mapped_column(String(128), nullable=False)
    scope: Mapped[str] = mapped_column(String(64), nullable=False)
    """Hash of what must match exactly: collection, filters, conversation, mode, model, instructions."""
    docs_version: Mapped[str] = mapped_column(String(128), nullable=False)
    """The tenant's documents version when the answer was made (a change invalidates the entry)."""
    question: Mapped[str] = mapped_column(Text, nullable=False)
    embedding: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    model_key: Mapped[str] = mapped_column(String(128), nullable=False)
    payload: Mapped[str] = mapped_column(Text, nullable=False)
    """JSON of the answer: answer, citations, sources, renderings, strategy."""
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    expires_at: Mapped[float] = mapped_column(Float, nullable=False)


#: Tables counted by `database_stats`, in a stable order (memories are counted in the long-term store).
COUNTED_TABLES: tuple[type[Base], ...] = (SessionRow, ConversationRow, AuditLogRow, CacheEntryRow)
#: The name `database_stats` reports the long-term store's memories under (the table's name before).
MEMORIES_COUNT = "memories"
#: Store items read per call while `database_stats` counts the memories.
STATS_PAGE = 1000


def database_url(settings: Settings) -> str:
    """RAG_DATABASE_URL, or the SQLite file `<data_dir>/app.sqlite`."""
    if settings.database_url:
        return settings.database_url
    data_dir = Path(settings.data_dir)
    # a relative folder resolves against the working directory
    return _sqlite_url(data_dir, "" if data_dir.is_absolute() else os.getcwd())


@functools.lru_cache(maxsize=RESOLVED_URL_CACHE_SIZE)
def _sqlite_url(data_dir: Path, cwd: str) -> str:
    """The URL of `<data_dir>/app.sqlite`, resolved once per folder and working directory: every
    turn asks for it, and resolving touches the file system."""
    return f"sqlite:///{(data_dir / APP_DB_FILENAME).resolve()}"


def alembic_config(url: str) -> AlembicConfig:
    """An Alembic configuration pointing at persistence/migrations (Alembic imported late: ~0.2 s)."""
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run the migrations up to `revision` on `engine`'s database, under an advisory lock on PostgreSQL (two
    workers on an empty database would both create the tables; SQLite uses `_migration_lock`)."""
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            lock = text("SELECT pg_advisory_xact_lock(:key)")
            connection.execute(lock, {"key": MIGRATION_ADVISORY_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


@dataclass
class Database:
    """An engine and its session factory over one migrated database."""

    url: str
    engine: Engine
    sessions: sessionmaker[Session]

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: committed at the end of the block, rolled back on an error."""
        with self.sessions.begin() as session:
            yield session

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


@contextmanager
def _migration_lock(file: Path | None) -> Iterator[None]:
    """One migrating process at a time per SQLite file (two processes opening a fresh file both read "no
    version"): a file lock beside the database (`filelock`: an flock the kernel drops when a process dies),
    taken here rather than in `upgrade` because it must exist before the file."""
    if file is None:
        yield
        return
    with FileLock(file.parent / f"{file.name}{MIGRATION_LOCK_SUFFIX}"):
        yield


def open_database(url: str, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> Database:
    """Create the engine for `url` and migrate the database to head. InvalidDatabaseUrlError for a URL that
    cannot name a database, DatabaseUnavailableError for one that cannot be opened or migrated now (a
    server that does not answer within `connect_timeout_s`, RAG_DATABASE_CONNECT_TIMEOUT_S)."""
    url = sqlalchemy_url(url)
    try:
        parsed = make_url(url)
    except Exception as error:  # noqa: BLE001 - any parse failure is a bad setting
        raise InvalidDatabaseUrlError(f"RAG_DATABASE_URL is not a database URL: {error}") from None
    shown = parsed.render_as_string(hide_password=True)
    sqlite = parsed.get_backend_name() == "sqlite"
    try:
        connect_args = {} if sqlite else {"connect_timeout": max(1, round(connect_timeout_s))}
        engine = create_engine(url, pool_pre_ping=not sqlite, connect_args=connect_args)
    except (NoSuchModuleError, ImportError, SQLAlchemyError, TypeError, ValueError) as error:
        # an unknown dialect, a driver that is not installed, query arguments the driver refuses
        raise InvalidDatabaseUrlError(f"RAG_DATABASE_URL {shown}: {error}") from None
    file = Path(parsed.database) if sqlite and parsed.database and parsed.database != ":memory:" else None
    try:
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
        if sqlite:
            event.listen(engine, "connect", configure_sqlite)
        with _migration_lock(file):
            upgrade(engine)
    except (SQLAlchemyError, OSError, ImportError) as error:
        engine.dispose()
        reason = str(getattr(error, "orig", None) or error).splitlines()[0]
        raise DatabaseUnavailableError(f"cannot open the app database {shown}: {reason}") from error
    return Database(url, engine, sessionmaker(engine, expire_on_commit=False))


_databases: dict[str, Database] = {}
_lock = threading.Lock()


def get_database(settings: Settings | None = None) -> Database:
    """The migrated database of `settings` (the process resources' settings by default), opened once per
    URL and process."""
    if settings is None:
        from persistence.process import process_settings  # only needed without settings

        settings = process_settings()
    url = database_url(settings)
    with _lock:
        database = _databases.get(url)
        if database is None:
            database = _databases[url] = open_database(url, settings.database_connect_timeout_s)
        return database


def close_databases() -> None:
    """Dispose every engine opened by this process (tests, shutdown)."""
    with _lock:
        for database in _databases.values():
            database.close()
        _databases.clear()


def database_stats(settings: Settings | None = None) -> dict[str, int]:
    """Row counts per table: sessions, conversations, memories (items of the long-term store), audit_logs,
    semantic_cache."""
    from persistence.long_term_store import (
        MEMORIES,
        MEMORIES_TABLE_MARKER,
        MIGRATION_NAMESPACE,
        all_items,
        long_term_store,
    )

    if settings is None:
        from persistence.process import process_settings

        settings = process_settings()
    database = get_database(settings)
    store = long_term_store(settings).store
    copied = store.get(MIGRATION_NAMESPACE, MEMORIES_TABLE_MARKER) is not None
    with database.session() as session:
        counts = {
            model.__tablename__: int(session.scalar(select(func.count()).select_from(model)) or 0)
            for model in (*COUNTED_TABLES, *(() if copied else (MemoryRow,)))
        }
    # the old table's rows until the first use of the memories copies them into the store
    memories = len(all_items(store, (MEMORIES,), page=STATS_PAGE)) + counts.pop(MemoryRow.__tablename__, 0)
    order = [SessionRow.__tablename__, ConversationRow.__tablename__, MEMORIES_COUNT]
    return {name: counts.get(name, memories) for name in order} | counts


def to_json(value: Any) -> str:
    """Compact JSON for the text columns (ids lists, details)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)

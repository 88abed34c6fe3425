"""Database URLs: which name PostgreSQL, and the forms SQLAlchemy and libpq open (a module of its own so every
store reads RAG_DATABASE_URL the same way without an import cycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.settings import Settings

#: Connections per process to PostgreSQL in each pool (the conversation saver's, the long-term store's);
#: turns waiting for a thread lock hold one more each while they wait. Keep workers x (pool + concurrent
#: turns) under the server's max_connections.
DATABASE_POOL_SIZE = 10

#: URL schemes of PostgreSQL (before any "+driver"), and the SQLAlchemy scheme with the installed driver.
POSTGRES_SCHEMES = frozenset({"postgresql", "postgres"})
SQLALCHEMY_POSTGRES_SCHEME = "postgresql+psycopg"


def is_postgres(url: str | None) -> bool:
    """Whether a database URL names PostgreSQL (postgresql://, postgres://, postgresql+driver://).

    Why one predicate: this URL alone moves conversations, app tables, catalog and keyword index, and the
    thread lock onto the server; every store must read it the same way."""
    if not url or "://" not in url:
        return False
    return url.split("://", 1)[0].split("+", 1)[0].lower() in POSTGRES_SCHEMES


def postgres_url(settings: Settings) -> str | None:
    """RAG_DATABASE_URL when it names PostgreSQL, else None (the embedded SQLite files are used)."""
    return settings.database_url if is_postgres(settings.database_url) else None


def sqlalchemy_url(url: str) -> str:
    """The URL SQLAlchemy opens: a Postgres URL gets psycopg 3 as its driver (SQLAlchemy's default driver
    for `postgresql://` is psycopg2, which is not installed); other URLs are returned unchanged."""
    if not is_postgres(url):
        return url
    return f"{SQLALCHEMY_POSTGRES_SCHEME}://{url.split('://', 1)[1]}"


def libpq_url(url: str) -> str:
    """The URL psycopg / libpq opens (the LangGraph saver, advisory locks): `postgresql://` without a
    SQLAlchemy driver suffix. ValueError for a URL that does not name PostgreSQL."""
    if not is_postgres(url):
        raise ValueError(f"not a PostgreSQL URL: {url.split('://', 1)[0]}://...")
    return f"postgresql://{url.split('://', 1)[1]}"


def is_postgres_url(location: Path | str) -> bool:
    """Whether a catalog location (a SQLite file's path, or a URL) is a PostgreSQL URL."""
    return isinstance(location, str) and is_postgres(location)


def shown_url(url: str) -> str:
    """The URL with its password hidden, for messages (sqlalchemy imported here: importing the graph must not
    load it, tests/test_import_cost.py)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(libpq_url(url)).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL we cannot parse is shown by its scheme only
        return url.split("://", 1)[0] + "://..."


def unavailable_message(url: str, error: BaseException, *, what: str = "conversation database") -> str:
    """One line: which server, what failed (libpq's first line), what to check."""
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return (
        f"cannot use the {what} {shown_url(url)} ({reason}); is the PostgreSQL server running? "
        "(RAG_DATABASE_URL)"
    )


def connection_kwargs(connect_timeout_s: float) -> dict[str, Any]:
    """What LangGraph's savers and store need of a connection (autocommit, dict rows, no server-side
    prepared statements: a pooled connection may be reset), plus libpq's connect timeout."""
    from psycopg.rows import dict_row

    return {
        "autocommit": True,
        "prepare_threshold": None,
        "row_factory": dict_row,
        "connect_timeout": max(1, round(connect_timeout_s)),
    }


def pool_options(connect_timeout_s: float) -> dict[str, Any]:
    """Options every PostgreSQL pool shares, sync and async: connections as connection_kwargs, and a wait of
    at most `connect_timeout_s` for one."""
    return {"min_size": 1, "kwargs": connection_kwargs(connect_timeout_s), "timeout": connect_timeout_s}

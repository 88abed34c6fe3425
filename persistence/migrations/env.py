"""Alembic environment of the app tables.

The engine (persistence.database.upgrade) hands its open connection in `config.attributes["connection"]`;
the `alembic` command line, run with `-x url=...` or a `sqlalchemy.url`, gets an engine of its own.
`render_as_batch` lets later revisions alter SQLite tables (which have no ALTER COLUMN).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from persistence.database import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit the SQL to stdout (`alembic upgrade head --sql`)."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate through the engine's connection, or one made from the configured URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("no database URL: run alembic with -x url=... or set sqlalchemy.url")
    engine = create_engine(url)
    with engine.begin() as connection:
        _run(connection)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

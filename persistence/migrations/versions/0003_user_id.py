"""A user identity beside the tenant: `user_id` on sessions, conversations and audit_logs.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 10:00:00

Who asked is recorded per turn (the run's context `user_id`: CLI --user, API user_id, RAG_DEFAULT_USER), so an
operator can tell the users of one tenant apart in the tables. A server default of '' keeps every row
written before this revision readable without a special case (no user said).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The tables that get the column.
TABLES = ("sessions", "conversations", "audit_logs")


def upgrade() -> None:
    """Apply this revision."""
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("user_id", sa.String(length=128), nullable=False, server_default=""))


def downgrade() -> None:
    """Undo this revision."""
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("user_id")

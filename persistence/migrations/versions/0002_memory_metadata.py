"""Memories keep caller metadata (the baseline design's add_memory takes a metadata dict): a JSON text column.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 10:00:00

Why a server default: rows written before this revision get '{}' rather than NULL, so readers need no
special case, and the upgrade of a database that already holds memories keeps every row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("metadata_json", sa.Text(), nullable=False, server_default="{}"))


def downgrade() -> None:
    """Undo this revision."""
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("metadata_json")

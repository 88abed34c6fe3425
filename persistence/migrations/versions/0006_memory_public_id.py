"""Memories get an opaque id per tenant (`public_id`): what callers see, look up and delete by.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 10:00:00

Why: the integer key is one sequence over every tenant, so a tenant adding two memories learned how many
the others had added in between, and SQLite hands a deleted key to the next row, so an id a caller kept
could name another memory later. New rows get 16 random hex digits (persistence.memories.new_memory_id);
rows written before keep their number as text, so the ids their callers hold go on working. The integer
key stays the row's internal identity (order of creation); no caller sees it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The unique index of a memory's id within its tenant.
INDEX = "uq_memories_tenant_public_id"


def upgrade() -> None:
    """Apply this revision: add the column, give existing rows their number as text, then require it."""
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("public_id", sa.String(length=32), nullable=True))
    op.execute("UPDATE memories SET public_id = CAST(id AS VARCHAR(32))")
    with op.batch_alter_table("memories") as batch:
        batch.alter_column("public_id", existing_type=sa.String(length=32), nullable=False)
        batch.create_index(INDEX, ["tenant", "public_id"], unique=True)


def downgrade() -> None:
    """Undo this revision."""
    with op.batch_alter_table("memories") as batch:
        batch.drop_index(INDEX)
        batch.drop_column("public_id")

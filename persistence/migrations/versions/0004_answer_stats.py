"""What `rag stats` reports per answer: a stable answer id, the strategy, confidence, model and token counts
on the audit row.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 10:00:00

Why columns rather than the `detail` JSON: stats group and average them in SQL (per strategy, per model)
on any database, without parsing a JSON text per row. Why nullable with no server default: a row written
before this revision did not measure them, and NULL says "unknown" where 0 or '' would be a false figure;
`rag stats` counts those rows as unknown. `answer_id` is the turn id that already links the turn's two
conversation rows (and sat in `detail`), now a column with an index so feedback finds its answer; old rows
keep NULL (their ids were never shown to anyone, so nobody can rate them).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The columns added to audit_logs, all nullable.
COLUMNS = (
    ("answer_id", sa.String(length=64)),
    ("strategy", sa.String(length=32)),
    ("confidence", sa.Float()),
    ("model", sa.String(length=128)),
    ("prompt_tokens", sa.Integer()),
    ("completion_tokens", sa.Integer()),
)
INDEX = "ix_audit_answer_id"


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("audit_logs") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
        batch.create_index(INDEX, ["answer_id"])


def downgrade() -> None:
    """Undo this revision."""
    with op.batch_alter_table("audit_logs") as batch:
        batch.drop_index(INDEX)
        for name, _kind in reversed(COLUMNS):
            batch.drop_column(name)

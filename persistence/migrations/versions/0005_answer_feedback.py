"""Users' feedback on an answer, kept on its audit row: thumbs up or down, a comment, who rated and when.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 11:00:00

Why columns on the answer's audit row rather than a table of their own: an answer gets one rating (rating
it again replaces the earlier one: a thumbs button toggles, it does not vote twice), so the row that already
holds the answer's tenant, strategy and model answers "which answers were rated down, of which strategy"
without a join, and the tenant check of a rating is the answer row's own tenant. NULL = not rated.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The columns added to audit_logs, all nullable (NULL = not rated).
COLUMNS = (
    ("feedback", sa.String(length=8)),
    ("feedback_comment", sa.Text()),
    ("feedback_user_id", sa.String(length=128)),
    ("feedback_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    """Apply this revision."""
    with op.batch_alter_table("audit_logs") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    """Undo this revision."""
    with op.batch_alter_table("audit_logs") as batch:
        for name, _kind in reversed(COLUMNS):
            batch.drop_column(name)

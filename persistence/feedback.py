"""Users' feedback on an answer: thumbs up or down and an optional comment on its audit row, by its random
128-bit `answer_id` (not a row number, so ids cannot be enumerated). A rating is looked up by (tenant,
answer id), so another tenant's id reads as unknown; rating again replaces the rating and says which one it
replaced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, cast

from sqlalchemy import select

from config.settings import Settings
from persistence.audit import ANSWER_ACTION
from persistence.database import AuditLogRow, Database, as_utc, get_database, utcnow
from persistence.process import process_settings

Rating = Literal["up", "down"]
RATINGS: tuple[Rating, ...] = ("up", "down")
#: What an answer id looks like (a turn id is 32 hex digits; any id of these characters is looked up).
ANSWER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Control characters a comment may not hold (tab, line feed and carriage return are text).
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: Longest user id kept with a rating (the audit row's column).
MAX_USER_CHARS = 128
#: Longest comment of an answer's feedback (`rag feedback`, POST /api/v1/feedback): a paragraph or two.
FEEDBACK_MAX_COMMENT_CHARS = 2000


class InvalidFeedbackError(ValueError):
    """Feedback that cannot be stored as given; the message starts with the field it names (`rating: ...`)."""


class AnswerNotFoundError(InvalidFeedbackError):
    """No answer with this id for the tenant (whether the id is unknown or another tenant's: one message)."""


@dataclass(frozen=True)
class Feedback:
    """A stored rating."""

    answer_id: str
    tenant: str
    rating: Rating
    comment: str
    user_id: str
    rated_at: str
    replaced: Rating | None
    """The answer's earlier rating that this one replaced (None: it had none)."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON of `rag feedback --json` and POST /api/v1/feedback."""
        return {
            "answer_id": self.answer_id,
            "tenant_id": self.tenant,
            "rating": self.rating,
            "comment": self.comment,
            "user_id": self.user_id,
            "rated_at": self.rated_at,
            "replaced": self.replaced,
        }


def check_rating(rating: str) -> Rating:
    """`rating` as a Rating; InvalidFeedbackError naming the choices otherwise."""
    if rating not in RATINGS:
        raise InvalidFeedbackError(f"rating: must be 'up' or 'down', not {rating[:20]!r}")
    return rating


def check_comment(comment: str, max_chars: int) -> str:
    """The comment without surrounding blanks; InvalidFeedbackError when too long or holding control
    characters (NUL is refused by PostgreSQL text columns, the others corrupt logs and terminals)."""
    comment = comment.strip()
    if len(comment) > max_chars:
        raise InvalidFeedbackError(f"comment: at most {max_chars} characters, got {len(comment)}")
    if CONTROL.search(comment):
        raise InvalidFeedbackError("comment: control characters are not allowed")
    return comment


def check_answer_id(answer_id: str) -> str:
    """The answer id as given; InvalidFeedbackError when it cannot be one (empty, too long, other
    characters), so a mistyped id gets a clear message rather than a lookup."""
    if not ANSWER_ID.match(answer_id):
        raise InvalidFeedbackError("answer_id: an answer id is 1-64 letters, digits, '_' or '-'")
    return answer_id


def rate_answer(
    answer_id: str,
    rating: str,
    *,
    tenant: str,
    comment: str = "",
    user_id: str = "",
    settings: Settings | None = None,
    database: Database | None = None,
) -> Feedback:
    """Store `rating` (up / down) and `comment` on `tenant`'s answer `answer_id`, replacing an earlier
    rating. InvalidFeedbackError for bad input, AnswerNotFoundError when the tenant has no such answer."""
    settings = settings or process_settings()
    checked_rating = check_rating(rating)
    checked_comment = check_comment(comment, FEEDBACK_MAX_COMMENT_CHARS)
    check_answer_id(answer_id)
    user = user_id.strip()[:MAX_USER_CHARS]
    database = database or get_database(settings)
    query = select(AuditLogRow).where(
        AuditLogRow.action == ANSWER_ACTION,
        AuditLogRow.tenant == tenant,
        AuditLogRow.answer_id == answer_id,
    )
    with database.session() as session:
        row = session.scalars(query.with_for_update()).first()
        if row is None:
            raise AnswerNotFoundError(f"answer_id: no answer {answer_id!r} for tenant {tenant!r}")
        replaced = cast(Rating | None, row.feedback)
        moment = utcnow()
        row.feedback, row.feedback_comment = checked_rating, checked_comment or None
        row.feedback_user_id, row.feedback_at = user or None, moment
    return Feedback(
        answer_id, tenant, checked_rating, checked_comment, user, as_utc(moment).isoformat(), replaced
    )

"""POST /api/v1/feedback (thumbs up / down and a comment on a recorded answer) and GET /api/v1/stats (the
caller's tenant's answer figures). Another tenant's answer id is the same 404 as one that never existed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request

from persistence.answer_stats import Prices, answer_stats
from persistence.database import DatabaseUnavailableError, InvalidDatabaseUrlError, get_database
from persistence.feedback import AnswerNotFoundError, InvalidFeedbackError, rate_answer
from service.api.errors import ApiError
from service.api.runtime import api_state
from service.api.schemas import FeedbackRequest

router = APIRouter(prefix="/api/v1", tags=["feedback"])

T = TypeVar("T")


def _call(action: Callable[[], T]) -> T:
    """Run a table function; its errors become the API's (404, 422 naming the field, 503)."""
    try:
        return action()
    except AnswerNotFoundError as error:
        raise ApiError(404, "NotFound", str(error), "answer_id") from None
    except InvalidFeedbackError as error:
        raise ApiError(422, "ValidationError", str(error), str(error).split(":", 1)[0]) from None
    except (DatabaseUnavailableError, InvalidDatabaseUrlError) as error:  # the server's setup, not the call
        raise ApiError(503, "DatabaseUnavailable", str(error)) from None


@router.post("/feedback")
def feedback(body: FeedbackRequest, request: Request) -> dict[str, Any]:
    """Rate the caller's answer up or down, with an optional comment (a later rating replaces it)."""
    state = api_state(request)
    tenant = state.tenant(request, body.tenant_id)
    user = state.settings.default_user if body.user_id is None else body.user_id
    stored = _call(
        lambda: rate_answer(
            body.answer_id,
            body.rating,
            tenant=tenant,
            comment=body.comment,
            user_id=user,
            settings=state.settings,
        )
    )
    state.metrics.record_feedback(stored.rating)
    return stored.as_dict()


@router.get("/stats")
def stats(request: Request, tenant_id: Annotated[str | None, Query()] = None) -> dict[str, Any]:
    """The caller's tenant's recorded answers: totals, per strategy, per model, feedback, tokens, cost."""
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    settings = state.settings
    figures = _call(lambda: answer_stats(get_database(settings), tenant=tenant, prices=Prices.of(settings)))
    return {"tenant_id": tenant, **{key: value for key, value in figures.items() if key != "tenant"}}

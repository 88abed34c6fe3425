"""Conversation memory over HTTP: POST /api/v1/conversations/{thread_id}/summarize writes a thread into its
tenant's store now (retrieval.conversation_index), and the idle sweeper (retrieval.auto_summary) runs while
RAG_SUMMARY_IDLE_S > 0. Another tenant's thread is a 404, as one nobody has.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from nodes.conversation_memory import summary_model
from nodes.resources import get_resources
from persistence.database import utcnow
from persistence.threads import ThreadAccessError
from retrieval.auto_summary import SUMMARY_SWEEP_S, SweepReport, sweep_idle
from retrieval.conversation_index import ThreadNotFoundError, summarize_thread
from service.api.errors import ApiError
from service.api.runtime import ApiState, api_state
from service.api.schemas import ID_PATTERN, SummarizeRequest

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1/conversations", tags=["conversations"])


@router.post("/{thread_id}/summarize")
def summarize(
    request: Request,
    thread_id: Annotated[str, Path(pattern=ID_PATTERN, description="The conversation's thread id.")],
    body: SummarizeRequest | None = None,
) -> dict[str, Any]:
    """Write the thread into the caller's store now; returns what was written."""
    state = api_state(request)
    body = body or SummarizeRequest()
    tenant = state.tenant(request, body.tenant_id)
    resources = get_resources()
    try:
        result = summarize_thread(
            resources.kb(),
            thread_id,
            conversation_id=body.conversation_id,
            tenant=tenant,
            model=summary_model(resources),
            metadata=body.ids(),
        )
    except (ThreadNotFoundError, ThreadAccessError):
        raise ApiError(404, "NotFound", f"unknown thread {thread_id!r}", "thread_id") from None
    return result.as_dict()


def sweep_once(state: ApiState, idle_since: datetime | None, now: datetime) -> SweepReport:
    """One idle sweep at `now` over the threads that went idle since `idle_since` (all when None)."""
    resources = get_resources()
    return sweep_idle(
        resources.kb(),
        idle_s=state.settings.summary_idle_s,
        model=summary_model(resources),
        idle_since=idle_since,
        now=now,
    )


async def idle_sweeper(state: ApiState) -> None:
    """Run the idle sweep every SUMMARY_SWEEP_S until cancelled (a failed sweep is logged)."""
    settings = state.settings
    idle_since: datetime | None = None
    while True:
        await asyncio.sleep(SUMMARY_SWEEP_S)
        now = utcnow()
        try:
            report = await asyncio.to_thread(sweep_once, state, idle_since, now)
        except Exception as error:  # noqa: BLE001 - the server goes on; the next sweep tries again
            logger.warning("idle summary sweep failed (%s: %s)", type(error).__name__, error)
            continue
        if report.summarized or report.failed:
            logger.info(
                "idle summary sweep: %d summarized, %d failed", len(report.summarized), len(report.failed)
            )
        idle_since = now - timedelta(seconds=settings.summary_idle_s)

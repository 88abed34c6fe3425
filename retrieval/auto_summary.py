"""When conversations summarize themselves (retrieval.conversation_index writes the memory), off the answer's
path:
- after a turn (nodes.record_turn): once a thread has RAG_SUMMARY_EVERY_TURNS turns more than its memory
  covers, its turns go to one background worker thread; jobs of one thread coalesce, so two summaries never
  race, and a failure is logged, never raised into an answer;
- when idle (`sweep_idle`, RAG_SUMMARY_IDLE_S): threads whose memory covers fewer turns than they have are
  summarized from their checkpoint (`rag summarize --idle`, the API server every SUMMARY_SWEEP_S); this also
  catches up jobs lost with a process.
Only threads given a conversation_id are summarized automatically: that id is how a caller opts into memory.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langchain_core.language_models import BaseChatModel
from sqlalchemy import select

from persistence.database import Database, SessionRow, as_utc, get_database, utcnow
from retrieval.conversation_index import SummaryResult, index_conversation, summarize_thread, summarized_turns
from retrieval.conversation_summary import ConversationTurn, Summarizer
from retrieval.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

#: Seconds the worker thread waits for a job before it ends (a new job starts a new one).
WORKER_IDLE_S = 30.0
#: Seconds between two idle sweeps of the API server (a cheap query when nothing went idle).
SUMMARY_SWEEP_S = 60.0


def is_due(turns: int, summarized: int, every: int) -> bool:
    """Whether at least `every` turns are new since the memory's `summarized` (every <= 0: never)."""
    return every > 0 and turns - summarized >= every


@dataclass(frozen=True)
class SummaryJob:
    """A thread's turns to write into its tenant's store (what nodes.record_turn hands over)."""

    kb: KnowledgeBase
    turns: tuple[ConversationTurn, ...]
    thread_id: str
    conversation_id: str
    tenant: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    summarizer: Callable[[], Summarizer | None] = lambda: None
    """Makes the summarizer when the job runs (None: extractive): choosing it may test the model."""
    every: int = 1

    @property
    def key(self) -> tuple[str, str]:
        """Jobs of one thread of one tenant replace each other while queued."""
        return (self.tenant, self.thread_id)


def run_job(job: SummaryJob) -> SummaryResult | None:
    """Write the job's thread when it is due (None when not)."""
    summarized = summarized_turns(job.kb, job.thread_id, tenant=job.tenant)
    if not is_due(len(job.turns), summarized, job.every):
        return None
    return index_conversation(
        job.kb,
        job.turns,
        thread_id=job.thread_id,
        conversation_id=job.conversation_id,
        tenant=job.tenant,
        summarize=job.summarizer(),
        metadata=job.metadata,
    )


class SummaryWorker:
    """One background thread that runs summary jobs in order, a thread's newest job replacing a queued one."""

    def __init__(self, run: Callable[[SummaryJob], SummaryResult | None] = run_job) -> None:
        self._run = run
        self._pending: dict[tuple[str, str], SummaryJob] = {}
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = False
        self.written = 0
        self.failed = 0

    def submit(self, job: SummaryJob) -> None:
        """Queue `job` (replacing a queued job of the same thread); returns at once."""
        with self._condition:
            self._pending.pop(job.key, None)
            self._pending[job.key] = job  # re-inserted: a thread's place is its newest job's
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="rag-summaries", daemon=True)
                self._thread.start()
            self._condition.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until no job is queued or running; False when `timeout` seconds passed first."""
        with self._condition:
            return self._condition.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _loop(self) -> None:
        while True:
            with self._condition:
                if not self._condition.wait_for(lambda: bool(self._pending), WORKER_IDLE_S):
                    self._thread = None
                    return
                key = next(iter(self._pending))
                job = self._pending.pop(key)
                self._busy = True
            try:
                if self._run(job) is not None:
                    self.written += 1
            except Exception as error:  # noqa: BLE001 - a summary is never worth a crash or an answer
                self.failed += 1
                logger.warning(
                    "could not summarize thread %s of tenant %s into the store (%s: %s)",
                    job.thread_id,
                    job.tenant,
                    type(error).__name__,
                    error,
                )
            finally:
                with self._condition:
                    self._busy = False
                    self._condition.notify_all()


_worker: SummaryWorker | None = None
_worker_lock = threading.Lock()


def summary_worker() -> SummaryWorker:
    """The process's worker (started on first use)."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = SummaryWorker()
        return _worker


@dataclass(frozen=True)
class IdleThread:
    """A thread the sessions table knows, as the sweep sees it."""

    tenant: str
    thread_id: str
    conversation_id: str
    turns: int
    updated_at: datetime


def idle_threads(
    database: Database, *, idle_before: datetime, idle_since: datetime | None
) -> list[IdleThread]:
    """Threads with a conversation id whose last turn was at or before `idle_before` (and after
    `idle_since` when given)."""
    query = select(SessionRow).where(SessionRow.conversation_id != "", SessionRow.updated_at <= idle_before)
    if idle_since is not None:
        query = query.where(SessionRow.updated_at > idle_since)
    with database.session() as session:
        return [
            IdleThread(row.tenant, row.thread_id, row.conversation_id, row.turns, as_utc(row.updated_at))
            for row in session.scalars(query.order_by(SessionRow.updated_at))
        ]


@dataclass
class SweepReport:
    """What one idle sweep did (`rag summarize --idle --json`)."""

    idle_before: str
    checked: int = 0
    summarized: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def sweep_idle(
    kb: KnowledgeBase,
    *,
    idle_s: float,
    model: BaseChatModel | None = None,
    idle_since: datetime | None = None,
    now: datetime | None = None,
) -> SweepReport:
    """Summarize every thread idle `idle_s` seconds or more whose memory covers fewer turns than the
    sessions table counts; a thread that fails is logged and reported, and the sweep goes on."""
    moment = now or utcnow()
    idle_before = moment - timedelta(seconds=idle_s)
    report = SweepReport(idle_before=idle_before.isoformat())
    for thread in idle_threads(get_database(kb.settings), idle_before=idle_before, idle_since=idle_since):
        report.checked += 1
        try:
            if summarized_turns(kb, thread.thread_id, tenant=thread.tenant) >= thread.turns:
                continue
            result = summarize_thread(kb, thread.thread_id, tenant=thread.tenant, model=model)
        except Exception as error:  # noqa: BLE001 - one broken thread must not stop the sweep
            logger.warning(
                "idle sweep: could not summarize thread %s of tenant %s (%s: %s)",
                thread.thread_id,
                thread.tenant,
                type(error).__name__,
                error,
            )
            report.failed.append(
                {"tenant": thread.tenant, "thread_id": thread.thread_id, "error": f"{type(error).__name__}"}
            )
            continue
        report.summarized.append(result.as_dict())
    return report

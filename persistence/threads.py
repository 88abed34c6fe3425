"""Threads (conversations) of the checkpoint store: who owns them, and list / delete / prune per tenant.

The store is the SQLite file `<data_dir>/checkpoints.sqlite`, or the PostgreSQL database of
RAG_DATABASE_URL (persistence.postgres_checkpoints); every function here takes either location
(persistence.checkpointer.checkpoint_location) and behaves the same on both.

Ownership: a thread belongs to the tenant of its first turn. `start_turn` writes that tenant to the state
channel `owner_tenant` on the first turn and never again, and refuses a turn whose context names another
tenant. Before a run, the runner (graphs.runner.Session) and the checkpoint savers of
persistence.checkpointer (through OwnerCheckedSaver below) check the owner again, so that a refused caller
writes nothing into the other tenant's thread (LangGraph stores a run's input before the first node runs)
and cannot replay it (`invoke(None, config)` on a finished thread runs no node at all, it only returns the
stored state).

Where the CLI reads owners: from the thread's latest checkpoint, the same `owner_tenant` channel the graph
checks. Why not a separate `thread_owners` table: every interface (CLI, Python `graph.invoke`, the LangGraph
server, the HTTP API) creates threads through the graph, and only the graph's own state is written by all of
them; a second table would be one more thing to keep in step with deletes, prunes and the server's saver. The
cost is one checkpoint read per thread for `rag threads list` and `prune`, a housekeeping command.

Every turn adds a checkpoint (every step, with RAG_CHECKPOINT_DURABILITY=async or in the server), and
every new thread adds its own, so a long-lived file still grows with the number of threads; `prune` keeps the
newest threads and, within the kept threads, only their latest checkpoint, then reclaims the space.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

if TYPE_CHECKING:
    from persistence.postgres_checkpoints import PostgresLocation, PruningPostgresSaver

#: Where a deployment's conversations live: the SQLite checkpoint file, or (RAG_DATABASE_URL=postgresql://)
#: the PostgreSQL database; persistence.checkpointer.checkpoint_location(settings) says which.
CheckpointLocation: TypeAlias = "Path | PostgresLocation"

#: Where LangGraph puts the run's Runtime (and so its context) in the config it hands the checkpointer.
RUNTIME_CONFIG_KEY = "__pregel_runtime"
#: Seconds a housekeeping command waits for a turn's write transaction on the file.
SQLITE_BUSY_TIMEOUT_S = 30.0

#: Holds a thread while it is deleted or pruned (the CLI passes the thread lock, so no turn is cut).
ThreadGuard = Callable[[str], AbstractContextManager[object]]


def _unguarded(_thread_id: str) -> AbstractContextManager[object]:
    return nullcontext()


class ThreadAccessError(PermissionError):
    """The thread belongs to another tenant (CLI exit 2, HTTP 403). The owner is never named."""


@dataclass(frozen=True)
class ThreadSummary:
    """One conversation in the checkpoint file."""

    thread_id: str
    checkpoints: int
    latest_checkpoint_id: str
    owner: str | None = None
    """Tenant of the thread's first turn (None: no turn has completed its start yet)."""
    first_question: str = ""
    """The conversation's first question, as stored (what a person recognises a thread by)."""
    turns: int = 0
    """Questions asked on the thread (human messages of its latest checkpoint)."""
    last_activity: str = ""
    """When its latest checkpoint was written (ISO 8601, UTC)."""


@dataclass(frozen=True)
class ThreadFacts:
    """What one read of a thread's latest checkpoint says about it."""

    owner: str | None
    first_question: str
    turns: int
    last_activity: str


def thread_facts(saved: CheckpointTuple | None) -> ThreadFacts:
    """Owner, first question, turn count and last activity of a thread from its latest root checkpoint."""
    values = _values(saved)
    questions = [m for m in values.get("messages") or [] if getattr(m, "type", "") == "human"]
    first = str(questions[0].content) if questions else ""
    return ThreadFacts(
        owner=thread_owner(values),
        first_question=" ".join(first.split()),
        turns=len(questions),
        last_activity=str(saved.checkpoint.get("ts") or "") if saved is not None else "",
    )


def thread_owner(values: Mapping[str, Any] | None, *, legacy: bool = True) -> str | None:
    """The owning tenant recorded in a thread's stored state values.

    `owner_tenant` when set; with `legacy`, for threads written before ownership was stored, the tenant of
    their earlier turns (`tenant`, which start_turn has always set) when the thread has messages. Only stored
    values may use `legacy`: inside a run, `tenant` may already hold the run's input."""
    if not values:
        return None
    owner = values.get("owner_tenant")
    if isinstance(owner, str) and owner:
        return owner
    if not legacy:
        return None
    tenant = values.get("tenant")
    if values.get("messages") and isinstance(tenant, str) and tenant:
        return tenant
    return None


def check_thread_access(thread_id: str, owner: str | None, tenant: str) -> None:
    """Raise ThreadAccessError unless `tenant` may use the thread (it owns it, or nobody does yet)."""
    if owner is not None and owner != tenant:
        thread_id = visible_thread_id(thread_id, owner)  # a scoped id would name the owner
        raise ThreadAccessError(
            f"thread {thread_id!r} belongs to another tenant; tenant {tenant!r} may not read, continue, "
            "replay or delete it"
        )


#: Between the tenant and the caller's thread id in a stored thread id. Tenants never contain it (letters,
#: digits, '.', '_', '-': persistence.vector_store.validate_collection_name), so the split is unambiguous.
THREAD_SCOPE_SEPARATOR = "/"

#: Reads the latest root checkpoint of a stored thread id (None: no such thread).
CheckpointLookup = Callable[[str], "CheckpointTuple | None"]


def scoped_thread_id(tenant: str, thread_id: str) -> str:
    """The stored id of a tenant's thread: thread ids are one namespace per tenant, so the same id in two
    tenants is two threads, and a tenant can neither claim nor probe the ids another one uses."""
    return f"{tenant}{THREAD_SCOPE_SEPARATOR}{thread_id}"


def visible_thread_id(stored: str, tenant: str) -> str:
    """The id the tenant knows a stored thread by (a legacy, unscoped id is shown as stored)."""
    prefix = f"{tenant}{THREAD_SCOPE_SEPARATOR}"
    return stored[len(prefix) :] if stored.startswith(prefix) else stored


def resolve_thread_id(tenant: str, thread_id: str, lookup: CheckpointLookup) -> str:
    """The stored id that `thread_id` means for `tenant`.

    The tenant's scoped thread when it exists; else a thread stored before ids were scoped (its raw id)
    when this tenant owns it, so upgrading loses no conversation; else the scoped id, which starts a new
    thread. Another tenant's legacy thread therefore looks exactly like an unknown id from outside."""
    scoped = scoped_thread_id(tenant, thread_id)
    if lookup(scoped) is not None:
        return scoped
    legacy = lookup(thread_id)
    if legacy is not None and thread_owner(_values(legacy)) == tenant:
        return thread_id
    return scoped


def root_config(thread_id: str) -> RunnableConfig:
    """The config that reads a thread's latest root checkpoint."""
    return {"configurable": {"thread_id": str(thread_id), "checkpoint_ns": ""}}


def _values(saved: CheckpointTuple | None) -> dict[str, Any]:
    return dict(saved.checkpoint.get("channel_values") or {}) if saved is not None else {}


def _run_tenant(config: RunnableConfig) -> str | None:
    """The tenant of the run a checkpointer call belongs to; None outside a run (get_state, housekeeping)."""
    runtime = (config.get("configurable") or {}).get(RUNTIME_CONFIG_KEY)
    if runtime is None:
        return None
    from state.context import run_context

    return run_context(runtime).tenant


def _root_thread(config: RunnableConfig) -> tuple[str, RunnableConfig] | None:
    """(thread id, config of its latest root checkpoint) for a root-namespace config, else None."""
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None or configurable.get("checkpoint_ns", ""):
        return None
    return str(thread_id), {"configurable": {"thread_id": str(thread_id), "checkpoint_ns": ""}}


class OwnerCheckedSaver:
    """Mixin for a checkpoint saver: a graph run of one tenant cannot load another tenant's thread.

    LangGraph hands the saver the run's config, which carries the run's Runtime (its context, so its
    tenant). Loading a thread for a run whose tenant is not the owner raises ThreadAccessError before the run
    writes its input or returns any stored state: this is what refuses `invoke(None, config)` replays and
    server runs (which never pass through the runner). The owner is always the thread's latest root
    checkpoint's, also when the run asks for an older checkpoint (time travel must not dodge the check).
    Calls outside a run (`get_state`, housekeeping) are not checked here: the runner checks those itself.
    """

    @staticmethod
    def _owner_check(
        config: RunnableConfig, saved: CheckpointTuple | None
    ) -> tuple[str, str, RunnableConfig | None] | None:
        """(tenant, thread id, config of the latest root checkpoint to read, or None when `saved` is it) for
        a run loading a stored root thread; None when there is nothing to check."""
        tenant = _run_tenant(config)
        root = _root_thread(config)
        if tenant is None or root is None or saved is None:
            return None
        thread_id, latest_config = root
        asked_older = bool((config.get("configurable") or {}).get("checkpoint_id"))
        return tenant, thread_id, latest_config if asked_older else None

    def _check_owner(self, config: RunnableConfig, saved: CheckpointTuple | None) -> None:
        check = self._owner_check(config, saved)
        if check is not None:
            tenant, thread_id, latest_config = check
            latest = saved if latest_config is None else super().get_tuple(latest_config)  # type: ignore[misc]
            check_thread_access(thread_id, thread_owner(_values(latest)), tenant)

    async def _acheck_owner(self, config: RunnableConfig, saved: CheckpointTuple | None) -> None:
        check = self._owner_check(config, saved)
        if check is not None:
            tenant, thread_id, latest_config = check
            latest = saved if latest_config is None else await super().aget_tuple(latest_config)  # type: ignore[misc]
            check_thread_access(thread_id, thread_owner(_values(latest)), tenant)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The stored checkpoint, refused for a run of a tenant that does not own the thread."""
        saved = super().get_tuple(config)  # type: ignore[misc]
        self._check_owner(config, saved)
        return saved

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The stored checkpoint, refused for a run of a tenant that does not own the thread."""
        saved = await super().aget_tuple(config)  # type: ignore[misc]
        await self._acheck_owner(config, saved)
        return saved


#: Prune strategies of BaseCheckpointSaver.prune ("delete_all" is the server adapter's name for "delete").
KEEP_LATEST = "keep_latest"
DELETE_STRATEGIES = frozenset({"delete", "delete_all"})


def prune_strategy(strategy: str) -> str:
    """KEEP_LATEST or "delete" for a strategy the server may pass; ValueError for any other."""
    if strategy == KEEP_LATEST:
        return KEEP_LATEST
    if strategy in DELETE_STRATEGIES:
        return "delete"
    raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")


class KeepNewestSaver:
    """Mixin for a sync checkpoint saver that keeps at most `keep` checkpoints per thread (0 = all): after
    each save it drops the older ones with the backend's own `keep_newest`."""

    keep: int = 0

    def keep_newest(self, thread_id: str, keep: int) -> int:
        """Drop the thread's checkpoints beyond the newest `keep`; how many were dropped."""
        raise NotImplementedError

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save, then drop the thread's checkpoints beyond the newest `keep`."""
        saved: RunnableConfig = super().put(config, checkpoint, metadata, new_versions)  # type: ignore[misc]
        if self.keep:
            self.keep_newest(str(saved["configurable"]["thread_id"]), self.keep)
        return saved


class AsyncKeepNewestSaver:
    """The async KeepNewestSaver (server, `ainvoke`), with the sync `prune` of the saver's other sync
    methods: `aprune` run on the saver's event loop from another thread."""

    keep: int = 0
    loop: asyncio.AbstractEventLoop

    async def akeep_newest(self, thread_id: str, keep: int) -> int:
        """Drop the thread's checkpoints beyond the newest `keep`; how many were dropped."""
        raise NotImplementedError

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save, then drop the thread's checkpoints beyond the newest `keep`."""
        saved: RunnableConfig = await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc]
        if self.keep:
            await self.akeep_newest(str(saved["configurable"]["thread_id"]), self.keep)
        return saved

    def prune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        """Sync `aprune`, called from another thread than the saver's event loop (like its other sync
        methods)."""
        try:
            if asyncio.get_running_loop() is self.loop:
                raise asyncio.InvalidStateError(
                    f"Synchronous calls to {type(self).__name__} are only allowed from a different thread; "
                    "use `await saver.aprune(...)` here"
                )
        except RuntimeError:
            pass
        aprune = self.aprune(thread_ids, strategy=strategy)  # type: ignore[attr-defined]  # the saver's own
        asyncio.run_coroutine_threadsafe(aprune, self.loop).result()


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to an existing checkpoint file (looking never creates one), committed and closed."""
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint file at {path} (no conversation yet)")
    connection = sqlite3.connect(str(path), timeout=SQLITE_BUSY_TIMEOUT_S)
    try:
        with connection:
            yield connection
    finally:
        connection.close()


def _reader(connection: sqlite3.Connection) -> SqliteSaver:
    """LangGraph's saver on an open checkpoint file, for its own reads and deletes (the tables exist: the
    threads were found in them)."""
    saver = SqliteSaver(connection)
    saver.is_setup = True
    return saver


def _facts(connection: sqlite3.Connection, thread_ids: list[str]) -> dict[str, ThreadFacts]:
    """Each thread's facts, from its latest root checkpoint (read with the saver's own deserializer)."""
    saver = _reader(connection)
    return {thread_id: thread_facts(saver.get_tuple(root_config(thread_id))) for thread_id in thread_ids}


def _owners(connection: sqlite3.Connection, thread_ids: list[str]) -> dict[str, str | None]:
    """Each thread's owner, from its latest root checkpoint."""
    return {thread_id: facts.owner for thread_id, facts in _facts(connection, thread_ids).items()}


def _postgres(location: CheckpointLocation) -> PruningPostgresSaver | None:
    """The Postgres saver of a location, None for a SQLite file."""
    if isinstance(location, Path):
        return None
    return location.saver()


def _saver_facts(saver: PruningPostgresSaver, thread_ids: list[str]) -> dict[str, ThreadFacts]:
    """Each thread's facts read through a saver (outside a run, so not owner-checked itself)."""
    return {thread_id: thread_facts(saver.get_tuple(root_config(thread_id))) for thread_id in thread_ids}


def _saver_owners(saver: PruningPostgresSaver, thread_ids: list[str]) -> dict[str, str | None]:
    """Each thread's owner read through a saver."""
    return {thread_id: facts.owner for thread_id, facts in _saver_facts(saver, thread_ids).items()}


def require_checkpoints(location: CheckpointLocation) -> None:
    """FileNotFoundError when no conversation was ever stored at a SQLite location (a database server
    always has a place for them: an empty one just holds no thread)."""
    if isinstance(location, Path) and not location.exists():
        raise FileNotFoundError(f"no checkpoint file at {location} (no conversation yet)")


def stored_owner(location: CheckpointLocation, thread_id: str) -> str | None:
    """The owner of one stored thread (None when unknown or not owned yet)."""
    saver = _postgres(location)
    if saver is not None:
        return _saver_owners(saver, [thread_id])[thread_id]
    with _connect(location) as connection:  # type: ignore[arg-type]
        return _owners(connection, [thread_id])[thread_id]


def stored_thread_id(location: CheckpointLocation, tenant: str, thread_id: str) -> str:
    """resolve_thread_id against a checkpoint location (the CLI's `rag threads` and `rag summarize`)."""
    saver = _postgres(location)
    if saver is not None:
        return resolve_thread_id(tenant, thread_id, lambda stored: saver.get_tuple(root_config(stored)))
    if not location.exists():  # type: ignore[union-attr]
        return scoped_thread_id(tenant, thread_id)
    with _connect(location) as connection:  # type: ignore[arg-type]
        reader = _reader(connection)
        return resolve_thread_id(tenant, thread_id, lambda stored: reader.get_tuple(root_config(stored)))


def list_threads(location: CheckpointLocation, tenant: str | None = None) -> list[ThreadSummary]:
    """Threads, most recently active first (checkpoint ids are time-ordered); with `tenant`, only that
    tenant's threads (threads nobody owns yet are nobody's to list)."""
    saver = _postgres(location)
    if saver is not None:
        rows = saver.thread_rows()
        facts = _saver_facts(saver, [thread for thread, _, _ in rows])
    else:
        with _connect(location) as connection:  # type: ignore[arg-type]
            rows = connection.execute(
                "SELECT thread_id, COUNT(*), MAX(checkpoint_id) FROM checkpoints "
                "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC"
            ).fetchall()
            facts = _facts(connection, [str(thread) for thread, _, _ in rows])
    summaries = [
        ThreadSummary(
            str(thread),
            int(count),
            str(latest),
            facts[str(thread)].owner,
            facts[str(thread)].first_question,
            facts[str(thread)].turns,
            facts[str(thread)].last_activity,
        )
        for thread, count, latest in rows
    ]
    if tenant is None:
        return summaries
    return [summary for summary in summaries if summary.owner == tenant]


# The oldest checkpoint to keep in one namespace of a thread: the N-th newest (NULL when there are fewer,
# so nothing is deleted). Checkpoint ids are time-ordered (uuid6), as LangGraph's own "latest" query assumes.
_OLDEST_KEPT = (
    "(SELECT kept.checkpoint_id FROM checkpoints AS kept WHERE kept.thread_id = ? "
    "AND kept.checkpoint_ns = {table}.checkpoint_ns ORDER BY kept.checkpoint_id DESC LIMIT 1 OFFSET ?)"
)
#: Writes of pruned checkpoints go first (the kept ones' pending writes stay), then the checkpoints.
PRUNE_STATEMENTS = (
    "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id < " + _OLDEST_KEPT.format(table="writes"),
    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id < "
    + _OLDEST_KEPT.format(table="checkpoints"),
)


def prune_parameters(thread_id: str, keep: int) -> tuple[str, str, int]:
    """Parameters of each PRUNE_STATEMENTS statement: keep the `keep` newest checkpoints (keep >= 1)."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    return (str(thread_id), str(thread_id), keep - 1)


def delete_thread(location: CheckpointLocation, thread_id: str, tenant: str | None = None) -> bool:
    """Remove a thread's checkpoints and writes (the saver's own delete_thread); False when it did not
    exist. With `tenant`, a thread of another tenant raises ThreadAccessError and is left intact; an unowned
    thread may be deleted."""
    saver = _postgres(location)
    if saver is not None:
        root = {"configurable": {"thread_id": str(thread_id), "checkpoint_ns": ""}}
        saved = saver.get_tuple(root)
        if saved is None and not saver.has_thread(thread_id):
            return False
        if tenant is not None:
            check_thread_access(thread_id, thread_owner(_values(saved)), tenant)
        saver.delete_thread(str(thread_id))
        return True
    with _connect(location) as connection:  # type: ignore[arg-type]
        found = connection.execute(
            "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,)
        ).fetchone()
        if found is None:
            return False
        if tenant is not None:
            check_thread_access(thread_id, _owners(connection, [thread_id])[thread_id], tenant)
        _reader(connection).delete_thread(thread_id)
    return True


def _keep_latest_checkpoint(location: CheckpointLocation, thread_id: str) -> int:
    """Drop all but the thread's newest checkpoint with the savers' own keep-newest statements; returns
    how many checkpoints went."""
    saver = _postgres(location)
    if saver is not None:
        return saver.keep_newest(thread_id, 1)
    with _connect(location) as connection:  # type: ignore[arg-type]
        writes, checkpoints = PRUNE_STATEMENTS
        connection.execute(writes, prune_parameters(thread_id, 1))
        return int(connection.execute(checkpoints, prune_parameters(thread_id, 1)).rowcount)


def prune_threads(
    location: CheckpointLocation, keep: int, tenant: str | None = None, guard: ThreadGuard = _unguarded
) -> dict[str, int]:
    """Keep the `keep` newest threads (each with only its latest checkpoint); return what was removed.
    With `tenant`, only that tenant's threads are counted, kept and removed. Each thread is handled inside
    `guard(thread_id)` (the thread lock: a turn running on it finishes first). A SQLite file is compacted
    at the end (VACUUM); PostgreSQL reclaims the space by its own autovacuum."""
    if keep < 0:
        raise ValueError(f"--keep must be >= 0, got {keep}")
    threads = list_threads(location, tenant)
    removed_threads = 0
    for summary in threads[keep:]:
        with guard(summary.thread_id):
            removed_threads += int(delete_thread(location, summary.thread_id))
    removed_checkpoints = 0
    for summary in threads[:keep]:
        with guard(summary.thread_id):
            removed_checkpoints += _keep_latest_checkpoint(location, summary.thread_id)
    if isinstance(location, Path):
        with _connect(location) as connection:
            connection.execute("VACUUM")
    return {"threads_removed": removed_threads, "checkpoints_removed": removed_checkpoints}


class OwnerCheckedSqliteSaver(OwnerCheckedSaver, SqliteSaver):
    """The sync SQLite saver with the tenant check on loading a thread (CLI, `graph.invoke`)."""


class OwnerCheckedAsyncSqliteSaver(OwnerCheckedSaver, AsyncSqliteSaver):
    """The async SQLite saver with the tenant check on loading a thread (server, `ainvoke`)."""

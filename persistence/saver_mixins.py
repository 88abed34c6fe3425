"""What this engine adds to LangGraph's checkpoint savers, SQLite and PostgreSQL alike: the tenant check on
loading a thread, and a bound on the checkpoints kept per thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from core.langgraph_compat import CONFIG_KEY_RUNTIME
from persistence.thread_access import check_thread_access, checkpoint_values, root_config, thread_owner


def _run_tenant(config: RunnableConfig) -> str | None:
    """The tenant of the run a checkpointer call belongs to; None outside a run (get_state, housekeeping).

    Private LangGraph API on purpose: the run's Runtime reaches the saver only under CONFIG_KEY_RUNTIME
    (`get_runtime()` reads the caller's context, not this run's); tests/test_compat.py pins the key. Imported,
    not spelled out, so a LangGraph without it fails at import instead of silently skipping the check."""
    runtime = (config.get("configurable") or {}).get(CONFIG_KEY_RUNTIME)
    if runtime is None:
        return None
    from state.context import run_context

    return run_context(runtime).tenant


class OwnerCheckedSaver(BaseCheckpointSaver[str]):
    """Mixin (listed before the saver class, so `super()` is that saver): a graph run of one tenant cannot
    load another tenant's thread.

    ThreadAccessError before the run writes its input or returns stored state, which refuses
    `invoke(None, config)` replays and server runs; the owner is always the latest root checkpoint's, also
    for time travel. Calls outside a run are checked by the runner instead."""

    @staticmethod
    def _owner_check(
        config: RunnableConfig, saved: CheckpointTuple | None
    ) -> tuple[str, str, RunnableConfig | None] | None:
        """(tenant, thread id, config of the latest root checkpoint to read, or None when `saved` is it) for
        a run loading a stored root thread; None when there is nothing to check."""
        tenant = _run_tenant(config)
        configurable = config.get("configurable") or {}
        thread_id = configurable.get("thread_id")
        if tenant is None or thread_id is None or configurable.get("checkpoint_ns", "") or saved is None:
            return None
        asked_older = bool(configurable.get("checkpoint_id"))
        return tenant, str(thread_id), root_config(thread_id) if asked_older else None

    def _check_owner(self, config: RunnableConfig, saved: CheckpointTuple | None) -> None:
        check = self._owner_check(config, saved)
        if check is not None:
            tenant, thread_id, latest_config = check
            latest = saved if latest_config is None else super().get_tuple(latest_config)
            check_thread_access(thread_id, thread_owner(checkpoint_values(latest)), tenant)

    async def _acheck_owner(self, config: RunnableConfig, saved: CheckpointTuple | None) -> None:
        check = self._owner_check(config, saved)
        if check is not None:
            tenant, thread_id, latest_config = check
            latest = saved if latest_config is None else await super().aget_tuple(latest_config)
            check_thread_access(thread_id, thread_owner(checkpoint_values(latest)), tenant)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The stored checkpoint, refused for a run of a tenant that does not own the thread."""
        saved = super().get_tuple(config)
        self._check_owner(config, saved)
        return saved

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The stored checkpoint, refused for a run of a tenant that does not own the thread."""
        saved = await super().aget_tuple(config)
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


class KeepNewestSaver(BaseCheckpointSaver[str]):
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
        saved = super().put(config, checkpoint, metadata, new_versions)
        if self.keep:
            self.keep_newest(str(saved["configurable"]["thread_id"]), self.keep)
        return saved


class AsyncKeepNewestSaver(BaseCheckpointSaver[str]):
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
        saved = await super().aput(config, checkpoint, metadata, new_versions)
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
        aprune = self.aprune(thread_ids, strategy=strategy)  # the saver's own
        asyncio.run_coroutine_threadsafe(aprune, self.loop).result()


# SQLite's keep-newest (SqliteSaver has no `prune`): the oldest checkpoint kept in a namespace is the N-th
# newest (NULL when fewer: nothing deleted); checkpoint ids are time-ordered (uuid6).
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

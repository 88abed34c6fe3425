"""Reset the model layer's process-wide state between tests: cached clients, measured strengths, the
embedded server."""

from __future__ import annotations

import atexit

from models import capability, factory, local_llm


def clear_model_cache() -> None:
    """Forget the cached clients and the measured strengths (a "new process" for the model factory)."""
    with factory._cache_lock:
        factory._cache.clear()
    with capability._registry_lock:
        capability._results.clear()
        capability._locks.clear()


def shutdown_local_server() -> None:
    """Stop the process-wide embedded server if it runs."""
    with local_llm._server_lock:
        server, local_llm._server = local_llm._server, None
    if server is not None:
        server.stop()
        atexit.unregister(server.stop)

"""What every route of one app shares: settings, the graph engine, metrics and the API keys."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import cast

from fastapi import Request

from config.settings import Settings
from service.api.auth import key_tenant, presented_key, resolve_tenant
from service.api.engine import Engine
from service.api.metrics import ApiMetrics

logger = logging.getLogger(__name__)


@dataclass
class ApiState:
    """The app's shared parts (on `app.state.api`)."""

    settings: Settings
    engine: Engine
    metrics: ApiMetrics
    keys: dict[str, str]

    def authorized_tenant(self, request: Request) -> str | None:
        """The tenant of the request's API key (None when keys are off); 401 for a missing or unknown key."""
        return key_tenant(self.keys, presented_key(request.headers))

    def tenant(self, request: Request, requested: str | None) -> str:
        """The tenant the request acts for (401 / 403 per service.api.auth)."""
        return resolve_tenant(self.authorized_tenant(request), requested, self.settings.default_tenant)

    def client_left(self, route: str, request: Request, detail: str) -> None:
        """Log and count a client that closed its connection before its answer (nginx's 499)."""
        self.metrics.record_disconnect(route)
        logger.warning(
            "499 %s %s: the client closed the connection before its answer (%s)",
            request.method,
            request.url.path,
            detail,
        )


async def wait_for_disconnect(request: Request) -> None:
    """Return when the client disconnects (`receive`: `is_disconnected` misses it behind middleware)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def api_state(request: Request) -> ApiState:
    """The ApiState of the app serving `request`."""
    return cast(ApiState, request.app.state.api)  # create_app sets it; Starlette's State holds Any

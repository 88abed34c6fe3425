"""`rag serve` answers GET /health while its warm-up (runner, stores, models) still runs, and every route
that needs them waits for that warm-up instead of running without them.

The warm-up here is a stand-in that blocks until the test releases it, so "still warming up" is a state
the test controls rather than a race with a real model load.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from config.settings import load_settings
from nodes.resources import Resources, use_resources
from service.api.app import create_app, warm_up_free_paths
from tests.helpers.api_server import serve_app

#: Seconds a request that must wait is given to show it is still waiting.
STILL_WAITING_S = 1.0
WAIT_LIMIT_S = 30.0


def test_health_answers_during_the_warm_up_and_other_routes_wait_for_it(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "rag")
    app = create_app(settings)
    begun, release = threading.Event(), threading.Event()

    def blocking_warm_up() -> float:
        begun.set()
        release.wait(WAIT_LIMIT_S)
        return 0.0

    app.state.api.engine.warm_up = blocking_warm_up
    with use_resources(Resources(settings)), serve_app(app) as client, ThreadPoolExecutor(1) as pool:
        assert begun.wait(WAIT_LIMIT_S)
        assert client.get("/health").status_code == 200
        assert client.get("/metrics").status_code == 200
        assert client.get("/docs").status_code == 200
        with httpx.Client(base_url=client.base_url, timeout=WAIT_LIMIT_S) as other:
            readiness = pool.submit(other.get, "/api/v1/rag/health")
            with pytest.raises(TimeoutError):  # still held back by the warm-up
                readiness.result(timeout=STILL_WAITING_S)
            release.set()
            assert readiness.result(timeout=WAIT_LIMIT_S).status_code == 200


def test_only_liveness_metrics_and_the_api_pages_skip_the_warm_up(tmp_path: Path) -> None:
    free = warm_up_free_paths(create_app(load_settings(data_dir=tmp_path / "rag")))
    pages = {"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/static-offline-docs/"}
    assert set(free) == {"/health", "/metrics", *pages}

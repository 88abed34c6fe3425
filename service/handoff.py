"""Hand a CLI question to a running `rag serve` of the same data directory instead of starting cold.

A server at RAG_API_HOST / RAG_API_PORT is used only when its GET /health reports this data directory's
fingerprint: a hash of its resolved path and the catalog's identity, so /health shows no path and a server of
another folder (or a replaced catalog) is never mistaken for this one.
"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from config.settings import Settings

#: Seconds the probe waits for GET /health: a server that is up answers it in milliseconds, and a CLI with
#: no server must not wait long before answering in-process.
HANDOFF_PROBE_TIMEOUT_S = 0.5
#: Seconds a handed-off request may take: the server bounds its own runs (RAG_API_RUN_TIMEOUT_S, then 504)
#: and queue waits (RAG_API_QUEUE_TIMEOUT_S, then 503); this only ends a connection that hangs beyond them.
HANDOFF_REQUEST_TIMEOUT_S = 3600.0
#: Addresses a server listens on for every interface; a client reaches such a server on the loopback.
ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


class ServerRefused(Exception):
    """The server answered the handed-off request with an error (its status and its message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ServerLost(Exception):
    """The server stopped answering during a handed-off request (the message says how)."""


def data_dir_fingerprint(settings: Settings) -> str:
    """A hash of the data directory's resolved path and its catalog's identity (never the path itself)."""
    from persistence.urls import postgres_url

    catalog: list[object]
    url = postgres_url(settings)
    if url is not None:  # the server's address and database, not its password
        parts = urllib.parse.urlsplit(url)
        catalog = ["postgres", parts.hostname, parts.port, parts.username, parts.path]
    else:
        try:
            stat = settings.catalog_path.resolve().stat()
            catalog = ["sqlite", stat.st_dev, stat.st_ino]
        except OSError:
            catalog = ["sqlite", "absent"]
    text = json.dumps([str(settings.data_dir.resolve()), *catalog])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def server_base(settings: Settings) -> str:
    """The base URL of `rag serve` at the configured address (an any-address bind reached on loopback)."""
    host = ANY_ADDRESS.get(settings.api_host, settings.api_host)
    return f"http://[{host}]:{settings.api_port}" if ":" in host else f"http://{host}:{settings.api_port}"


def same_data_server(settings: Settings) -> str | None:
    """The base URL of a running `rag serve` of this data directory, else None."""
    base = server_base(settings)
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=HANDOFF_PROBE_TIMEOUT_S) as reply:
            health = json.loads(reply.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError):
        return None
    if not isinstance(health, dict) or health.get("data_dir") != data_dir_fingerprint(settings):
        return None
    return base


def post_json(base: str, path: str, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """POST `body` to the server and return its JSON answer (ServerRefused, ServerLost)."""
    headers = {"Content-Type": "application/json"}
    if settings.api_key:
        headers["X-API-Key"] = settings.api_key
    request = urllib.request.Request(
        f"{base}{path}", data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=HANDOFF_REQUEST_TIMEOUT_S) as reply:
            answer = json.loads(reply.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        raise ServerRefused(error.code, _error_message(error)) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ServerLost(f"{base}{path}: {getattr(error, 'reason', error)}") from None
    if not isinstance(answer, dict):
        raise ServerLost(f"{base}{path} answered {type(answer).__name__}, not a JSON object")
    return answer


def _error_message(error: urllib.error.HTTPError) -> str:
    """The server's own message of an error answer (its `message`, or a validation error's details)."""
    try:
        body = json.loads(error.read().decode("utf-8"))
    except (OSError, ValueError):
        return f"HTTP {error.code} {error.reason}"
    if not isinstance(body, dict):
        return f"HTTP {error.code} {error.reason}"
    message = str(body.get("message") or body.get("detail") or f"HTTP {error.code} {error.reason}")
    details = body.get("detail")
    if isinstance(details, list) and details:
        fields = "; ".join(
            f"{'.'.join(str(part) for part in item.get('loc', []) if part != 'body')}: {item.get('msg')}"
            for item in details
            if isinstance(item, dict)
        )
        message = f"{message} ({fields})" if fields else message
    return message

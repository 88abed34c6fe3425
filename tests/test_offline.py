"""Offline by default: ingesting and searching with the real embedding model opens no network connection.

Every outbound connect (socket.connect / connect_ex / create_connection) and every host-name lookup is
routed through a guard that lets loopback and Unix sockets through and records, then refuses, anything
else. The real test is slow (it loads MiniLM); the guard itself is checked by fast tests so a guard that
stopped guarding would be noticed.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any

import pytest

import retrieval.embeddings as embeddings_module
from config.settings import Settings
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import SEARCH_MODES, Searcher
from tests.conftest import SAMPLE_CORPUS

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def is_local_host(host: Any) -> bool:
    """Loopback addresses (127.0.0.0/8, ::1, IPv4-mapped loopback) and the names that mean them."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host is None:
        return True
    text = str(host).split("%")[0]
    if text.lower() in LOCAL_NAMES:
        return True
    try:
        address = ip_address(text)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


@dataclass
class NetworkGuard:
    """Records refused attempts as (function, address)."""

    attempts: list[tuple[str, str]] = field(default_factory=list)

    def refuse(self, function: str, address: Any) -> OSError:
        self.attempts.append((function, repr(address)))
        return OSError(f"network access blocked by test: {function}({address!r})")


@pytest.fixture
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """Block and record every non-local connection or lookup for the duration of a test."""
    guard = NetworkGuard()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection
    real_getaddrinfo = socket.getaddrinfo

    def allowed(sock: socket.socket, address: Any) -> bool:
        if getattr(socket, "AF_UNIX", None) is not None and sock.family == socket.AF_UNIX:
            return True
        return is_local_host(address[0] if isinstance(address, tuple) else address)

    def connect(sock: socket.socket, address: Any) -> None:
        if not allowed(sock, address):
            raise guard.refuse("connect", address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        if not allowed(sock, address):
            raise guard.refuse("connect_ex", address)
        return real_connect_ex(sock, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not is_local_host(address[0]):
            raise guard.refuse("create_connection", address)
        return real_create_connection(address, *args, **kwargs)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not (is_local_host(host) or host == socket.gethostname()):
            raise guard.refuse("getaddrinfo", host)
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield guard


def test_guard_refuses_and_records_remote_connections(network_guard: NetworkGuard) -> None:
    # 203.0.113.0/24 is TEST-NET-3: never routed, and the guard must refuse before any packet anyway.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(OSError, match="blocked"):
        sock.connect(("203.0.113.7", 443))
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("example.com", 80), timeout=1)
    with pytest.raises(OSError, match="blocked"):
        socket.getaddrinfo("huggingface.co", 443)
    functions = [function for function, _ in network_guard.attempts]
    assert functions == ["connect", "create_connection", "getaddrinfo"]


def test_guard_lets_loopback_through(network_guard: NetworkGuard) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
            assert client.connect_ex(("127.0.0.1", port)) == 0
    assert network_guard.attempts == []


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("10.0.0.1", False),
        ("8.8.8.8", False),
        ("::ffff:8.8.8.8", False),
        ("huggingface.co", False),
    ],
)
def test_local_host_classification(host: str, local: bool) -> None:
    assert is_local_host(host) is local


@pytest.mark.slow
def test_real_model_ingest_and_search_stay_offline(settings: Settings, network_guard: NetworkGuard) -> None:
    # Load the model under the guard even if an earlier test already loaded one in this process.
    embeddings_module._minilm.cache_clear()
    kb = KnowledgeBase(settings)
    try:
        summary = ingest_paths(kb, [SAMPLE_CORPUS])
        assert summary.count("failed") == 0 and summary.count("indexed") == 7
        assert summary.chunks > 20
        for mode in SEARCH_MODES:
            hits = Searcher(kb).search("Which planet is the largest?", mode=mode, k=5).hits
            assert hits, mode
            assert any("Jupiter" in hit.text for hit in hits), mode
    finally:
        kb.close()
    assert network_guard.attempts == []

"""The server fixtures themselves: each test gets an empty database of its own on the throwaway PostgreSQL,
and the Chroma server answers (what every `servers` test builds on)."""

from __future__ import annotations

import json
import urllib.request

import psycopg
import pytest

pytestmark = pytest.mark.servers

SEEN: list[str] = []


@pytest.mark.parametrize("round_", [1, 2])
def test_each_test_gets_a_fresh_empty_database(pg_url: str, round_: int) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        conn.execute("CREATE TABLE marker (test int)")
        conn.execute("INSERT INTO marker VALUES (%s)", (round_,))
    assert name is not None and tables is not None
    assert name[0].startswith("test_")
    assert tables[0] == 0  # the other round's marker table is not here
    assert name[0] not in SEEN
    SEEN.append(name[0])


def test_chroma_server_answers(chroma_server: tuple[str, int]) -> None:
    host, port = chroma_server
    with urllib.request.urlopen(f"http://{host}:{port}/api/v2/heartbeat", timeout=5) as reply:
        assert "nanosecond heartbeat" in json.loads(reply.read())

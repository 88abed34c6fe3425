"""The set-up lock taken by polling (persistence/advisory.py): it waits while another session holds the key,
releases it after the block, and gives up after its wait, with no statement left blocking in between."""

from __future__ import annotations

from typing import Any

import pytest

from persistence import advisory
from persistence.advisory import AdvisoryLockTimeout, advisory_lock


class FakeConnection:
    """Answers pg_try_advisory_lock with `answers` in turn (dict rows, as the store's pool gives)."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.statements: list[str] = []

    def execute(self, sql: str, params: tuple[Any, ...]) -> FakeConnection:
        self.statements.append(sql.split("(")[0])
        self.row = {"took": self.answers.pop(0)} if "try" in sql else {"pg_advisory_unlock": True}
        return self

    def fetchone(self) -> dict[str, bool]:
        return self.row


def test_the_lock_is_tried_until_free_then_released(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(advisory, "ADVISORY_POLL_S", 0.0)
    connection = FakeConnection([False, False, True])
    with advisory_lock(connection, 7):
        assert connection.statements == ["SELECT pg_try_advisory_lock"] * 3
    assert connection.statements[-1] == "SELECT pg_advisory_unlock"


def test_a_lock_held_too_long_is_a_timeout_and_nothing_is_released() -> None:
    connection = FakeConnection([False] * 1000)
    with pytest.raises(AdvisoryLockTimeout), advisory_lock(connection, 7, wait_s=0.0):
        pass
    assert "SELECT pg_advisory_unlock" not in connection.statements

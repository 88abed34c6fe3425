"""The model self-test's verdicts kept in the data directory, so every process reuses them.

A verdict is keyed by the model's identity (embedded: catalog name, sha256, weights file path, size and
mtime; endpoint: provider, base URL, model) and SELF_TEST_VERSION. The JSON file is replaced atomically; a
file that cannot be read or written is logged and the test runs again.
Two processes writing at once can lose one verdict, which only costs one more self-test: a verdict is an
optimisation, never a reason to fail an answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from models.capability import SelfTest, Strength

logger = logging.getLogger(__name__)

#: Version of the self-test (prompt, expected answer, judgement): raising it makes every stored verdict stale.
SELF_TEST_VERSION = 1
#: File of the verdicts inside the data directory.
STORE_FILE_NAME = "self_tests.json"
#: Characters of the model's raw reply kept with a verdict (enough to see why it failed).
STORED_RAW_CHARS = 500


@dataclass(frozen=True)
class StoredVerdict:
    """One stored verdict: the identity hash it is keyed by, a readable label of the model and the test."""

    identity: str
    label: str
    strength: Strength
    reason: str
    seconds: float
    attempts: int
    raw: str
    tested_at: float
    test_version: int

    def self_test(self) -> SelfTest:
        """The verdict as the self-test's result."""
        return SelfTest(self.strength, self.reason, self.seconds, self.attempts, self.raw)


def identity_hash(*parts: object) -> str:
    """A stable hash of a model's identity parts and the test version (what a verdict is keyed by)."""
    text = json.dumps([SELF_TEST_VERSION, *[str(part) for part in parts]], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def file_identity(path: Path) -> tuple[str, int, int]:
    """A weights file's resolved path, size and modification time (cheap: no hashing of gigabytes)."""
    resolved = path.resolve()
    stat = resolved.stat()
    return str(resolved), stat.st_size, stat.st_mtime_ns


class SelfTestStore:
    """The verdicts of one data directory. Objects are cheap: each read goes to the file."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / STORE_FILE_NAME
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            logger.warning("model self-test verdicts in %s are unreadable; ignoring them", self.path)
            return {}
        verdicts = data.get("verdicts") if isinstance(data, dict) else None
        return cast(dict[str, dict[str, Any]], verdicts) if isinstance(verdicts, dict) else {}

    def _write(self, verdicts: dict[str, dict[str, Any]]) -> None:
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.partial")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps({"verdicts": verdicts}, indent=1, sort_keys=True), encoding="utf-8")
            partial.replace(self.path)
        except OSError:
            logger.warning("could not store model self-test verdicts in %s", self.path, exc_info=True)
            partial.unlink(missing_ok=True)

    @staticmethod
    def _parse(identity: str, record: dict[str, Any]) -> StoredVerdict | None:
        try:
            verdict = StoredVerdict(
                identity=identity,
                label=str(record["label"]),
                strength=cast(Strength, record["strength"]),
                reason=str(record["reason"]),
                seconds=float(record["seconds"]),
                attempts=int(record["attempts"]),
                raw=str(record.get("raw", "")),
                tested_at=float(record["tested_at"]),
                test_version=int(record["test_version"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
        if verdict.strength not in ("weak", "strong") or verdict.test_version != SELF_TEST_VERSION:
            return None
        return verdict

    def get(self, identity: str) -> StoredVerdict | None:
        """The stored verdict of this identity (None when absent, malformed or from another test version)."""
        record = self._read().get(identity)
        return self._parse(identity, record) if isinstance(record, dict) else None

    def put(self, identity: str, label: str, test: SelfTest) -> None:
        """Store a verdict (replacing the identity's previous one)."""
        verdict = StoredVerdict(
            identity=identity,
            label=label,
            strength=test.strength,
            reason=test.reason,
            seconds=round(test.seconds, 3),
            attempts=test.attempts,
            raw=test.raw[:STORED_RAW_CHARS],
            tested_at=time.time(),
            test_version=SELF_TEST_VERSION,
        )
        record = asdict(verdict)
        del record["identity"]
        with self._lock:
            verdicts = self._read()
            verdicts[identity] = record
            self._write(verdicts)

    def verdicts(self) -> list[StoredVerdict]:
        """Every usable stored verdict, newest first."""
        parsed = [
            self._parse(identity, record)
            for identity, record in self._read().items()
            if isinstance(record, dict)
        ]
        return sorted((v for v in parsed if v is not None), key=lambda v: v.tested_at, reverse=True)

    def clear(self) -> int:
        """Forget every stored verdict; returns how many entries the file held."""
        with self._lock:
            held = len(self._read())
            try:
                self.path.unlink(missing_ok=True)
            except OSError as error:
                raise OSError(f"cannot remove {self.path}: {error.strerror or error}") from error
        return held

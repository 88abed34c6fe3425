"""`rag doctor [--repair] [--json]`: check the stores of a data folder and repair what can be rebuilt.

Checks: the catalog's and checkpoints' SQLite integrity, the keyword index against the chunk rows, each
tenant's Chroma collection (readable?) and its vectors against the catalog. `--repair` rebuilds from the
catalog, the reference, what can be rebuilt, and moves a damaged checkpoint file aside. The report also lists
the stored model self-test verdicts and the answering model's calibrator. Exit 0 when healthy, 1 otherwise.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.markup import escape

from config.settings import Settings
from persistence.errors import StoreUnavailableError

if TYPE_CHECKING:  # the stores import chromadb and SQLAlchemy (seconds): only `rag doctor` pays for them
    from persistence.postgres_checkpoints import PostgresLocation
    from retrieval.knowledge_base import KnowledgeBase
    from retrieval.store_health import CollectionState

Status = Literal["ok", "damaged", "repaired"]

#: How the report names the finding of one damaged Chroma collection.
COLLECTION_STORE = "vector collection"

#: Seconds the checkpoint check waits for a writer to release the file.
CHECKPOINT_BUSY_TIMEOUT_S = 30.0


@dataclass
class Finding:
    """The outcome of one check: which store, where, its status and what was found or done."""

    store: str
    path: str
    status: Status
    detail: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class DoctorReport:
    """Every finding; healthy when no store is left damaged."""

    findings: list[Finding]
    self_tests: list[dict[str, object]] = field(default_factory=list)
    """The stored model self-test verdicts (label, strength, reason, when), newest first."""
    cleared_self_tests: int | None = None
    """How many stored verdicts `--clear-self-tests` removed (None: not asked)."""
    calibrator: dict[str, object] = field(default_factory=dict)
    """Which calibrator judges the configured model's answers; a warning when it is not the model's own."""

    @property
    def healthy(self) -> bool:
        """No store left damaged (repaired ones count as healthy)."""
        return all(finding.status != "damaged" for finding in self.findings)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready report."""
        report: dict[str, object] = {
            "healthy": self.healthy,
            "checks": [asdict(finding) for finding in self.findings],
            "self_tests": self.self_tests,
            "calibrator": self.calibrator,
        }
        if self.cleared_self_tests is not None:
            report["cleared_self_tests"] = self.cleared_self_tests
        return report


def check_catalog(kb: KnowledgeBase) -> Finding:
    """SQLite integrity of the catalog file (a Postgres catalog: its counts say it answers)."""
    from persistence.errors import CatalogDamagedError, damaged_catalog_message

    path = catalog_location(kb.settings)
    try:
        problems = kb.catalog.integrity_errors()
    except CatalogDamagedError as error:
        return Finding("catalog", path, "damaged", str(error))
    if problems:
        reason = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
        return Finding("catalog", path, "damaged", damaged_catalog_message(kb.catalog.path, reason))
    counts = {"documents": len(kb.catalog.documents()), "chunks": kb.catalog.count_chunks()}
    return Finding("catalog", path, "ok", "integrity ok", counts)


def check_keyword_index(kb: KnowledgeBase, repair: bool) -> Finding:
    """Keyword rows against chunk rows; `repair` rebuilds the index from the chunk rows in one transaction."""
    path = catalog_location(kb.settings)
    missing, extra, error = kb.catalog.keyword_index_drift()
    counts = {"chunks_without_terms": missing, "terms_without_chunk": extra}
    if not (missing or extra or error):
        return Finding("keyword index", path, "ok", "every chunk is indexed", counts)
    problem = f"{missing} chunks not indexed, {extra} rows without a chunk" + (f", {error}" if error else "")
    if not repair:
        return Finding("keyword index", path, "damaged", f"{problem}; run `rag doctor --repair`", counts)
    rebuilt = kb.catalog.rebuild_keyword_index()
    return Finding("keyword index", path, "repaired", f"{problem}; rebuilt {rebuilt} rows", counts)


def check_collection(kb: KnowledgeBase, state: CollectionState, repair: bool) -> Finding:
    """A collection Chroma cannot read, named with its tenant; `repair` rebuilds it from the catalog."""
    from persistence.thread_lock import ThreadBusyError
    from persistence.vector_store import chroma_collection_name
    from retrieval.embedding_errors import EmbeddingError
    from retrieval.store_health import damaged_collection_message, rebuild_collection

    name = chroma_collection_name(state.tenant, state.collection)
    where = f"{kb.settings.chroma_host or kb.settings.chroma_dir} ({name})"
    chunks = kb.catalog.count_chunks(state.tenant, state.collection)
    message = damaged_collection_message(state)
    if not repair:
        return Finding(COLLECTION_STORE, where, "damaged", f"{message} ({chunks} chunks)", {"chunks": chunks})
    try:
        done = rebuild_collection(kb, state.tenant, state.collection)
    except (StoreUnavailableError, EmbeddingError, ThreadBusyError) as error:
        return Finding(COLLECTION_STORE, where, "damaged", f"{message}; the rebuild failed: {error}")
    embedded = done.chunks - done.cached
    return Finding(
        COLLECTION_STORE,
        where,
        "repaired",
        f"collection {state.collection!r} of tenant {state.tenant!r} could not be read ({state.error}); "
        f"rebuilt {done.chunks} chunks from the catalog ({done.cached} vectors from the embedding cache, "
        f"{embedded} embedded again)",
        {"chunks": done.chunks, "cached": done.cached, "embedded": embedded},
    )


def check_vectors(kb: KnowledgeBase, repair: bool) -> list[Finding]:
    """Every collection probed, then the readable ones' ids against the catalog's."""
    from retrieval.store_health import collection_states, repair_vectors, reset_checks, vector_gaps

    where = kb.settings.chroma_host or str(kb.settings.chroma_dir)
    try:
        states = collection_states(kb)
    except StoreUnavailableError as error:
        return [Finding("vectors", where, "damaged", str(error))]
    findings: list[Finding] = []
    readable: list[tuple[str, str]] = []
    for state in states:
        finding = check_collection(kb, state, repair) if state.damaged else None
        if finding is not None:
            findings.append(finding)
        if finding is None or finding.status == "repaired":
            readable.append((state.tenant, state.collection))
    try:
        gaps = vector_gaps(kb, readable)
    except StoreUnavailableError as error:
        return [*findings, Finding("vectors", where, "damaged", str(error))]
    counts = {
        "chunks": sum(gap.catalog_chunks for gap in gaps),
        "missing": sum(gap.missing for gap in gaps),
        "strays": sum(gap.strays for gap in gaps),
    }
    bad = [gap for gap in gaps if gap.missing or gap.strays]
    if not bad:
        detail = f"{len(gaps)} readable collections agree with the catalog"
        return [*findings, Finding("vectors", where, "ok", detail, counts)]
    scopes = ", ".join(f"{gap.tenant}/{gap.collection}" for gap in bad[:5])
    problem = f"{counts['missing']} chunks without a vector, {counts['strays']} stray vectors ({scopes})"
    if not repair:
        return [
            *findings,
            Finding("vectors", where, "damaged", f"{problem}; run `rag doctor --repair`", counts),
        ]
    done = repair_vectors(kb, bad, remove_strays=True)
    reset_checks()
    detail = f"{problem}; restored {done.restored}, removed {done.removed}"
    return [*findings, Finding("vectors", where, "repaired", detail, counts)]


def check_postgres_checkpoints(location: PostgresLocation) -> Finding:
    """Conversations on PostgreSQL (RAG_DATABASE_URL): the server answers and the saver's tables are there."""
    try:
        threads = len(location.saver().thread_rows())
    except StoreUnavailableError as error:
        return Finding("checkpoints", str(location), "damaged", str(error))
    return Finding("checkpoints", str(location), "ok", f"PostgreSQL answers; {threads} threads stored")


def check_checkpoints(settings: Settings, repair: bool) -> Finding:
    """SQLite integrity of the checkpoint file; `repair` moves a damaged file aside (kept) for a fresh one."""
    from persistence.checkpointer import checkpoint_location

    location = checkpoint_location(settings)
    if not isinstance(location, Path):
        return check_postgres_checkpoints(location)
    path = settings.checkpoint_path
    if not path.exists():
        return Finding("checkpoints", str(path), "ok", "no conversations stored yet")
    try:
        with sqlite3.connect(str(path), timeout=CHECKPOINT_BUSY_TIMEOUT_S) as connection:
            rows = [str(row[0]) for row in connection.execute("PRAGMA integrity_check")]
        problems = [] if rows == ["ok"] else rows
    except sqlite3.DatabaseError as error:
        problems = [str(error)]
    if not problems:
        return Finding("checkpoints", str(path), "ok", "integrity ok")
    problem = "; ".join(problems[:3])
    if not repair:
        return Finding(
            "checkpoints",
            str(path),
            "damaged",
            f"{problem}; `rag doctor --repair` moves it aside (kept) so that new conversations work",
        )
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    path.rename(aside)
    for suffix in ("-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(aside.with_name(aside.name + suffix))
    return Finding("checkpoints", str(path), "repaired", f"{problem}; moved aside to {aside}")


def catalog_location(settings: Settings) -> str:
    """Where the catalog is (a Postgres URL without its password), found without opening it: a damaged file
    must be named, not opened."""
    from persistence.database import postgres_url
    from persistence.urls import shown_url

    url = postgres_url(settings)
    return shown_url(url) if url else str(settings.catalog_path)


def stored_self_tests(settings: Settings) -> list[dict[str, object]]:
    """The model self-test verdicts stored in the data folder, as the report shows them."""
    from models.self_test_store import SelfTestStore

    return [
        {
            "model": verdict.label,
            "strength": verdict.strength,
            "reason": verdict.reason,
            "seconds": verdict.seconds,
            "tested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(verdict.tested_at)),
        }
        for verdict in SelfTestStore(settings.data_dir).verdicts()
    ]


#: What `rag doctor` says of a model judged by the default calibrator.
DEFAULT_CALIBRATOR_WARNING = (
    "no calibrator of its own: its answers are judged by the default one (fit on the embedded default reader "
    "without log-probabilities), so its confidence may be off; fit one with `rag eval calibrate --model ...`"
)


def calibrator_status(settings: Settings) -> dict[str, object]:
    """The answering model's calibrator: its name, whether it is the model's own, the warning when not."""
    from answering.calibrator import calibrator_for
    from nodes.resources import Resources

    identity = Resources(settings).model_identity("generate")  # the key the engine picks it by
    calibrator, own = calibrator_for(identity)
    return {
        "model": identity,
        "calibrator": calibrator.name,
        "own": own,
        "warning": "" if own else DEFAULT_CALIBRATOR_WARNING,
    }


def run_doctor(
    settings: Settings,
    *,
    repair: bool = False,
    kb: KnowledgeBase | None = None,
    clear_self_tests: bool = False,
) -> DoctorReport:
    """Check (and with `repair`, rebuild) every store of the data folder; list the self-test verdicts."""
    from models.self_test_store import SelfTestStore
    from persistence.database import postgres_url
    from retrieval.knowledge_base import KnowledgeBase

    try:
        cleared = SelfTestStore(settings.data_dir).clear() if clear_self_tests else None
    except OSError as error:
        raise StoreUnavailableError(str(error)) from error

    owned = kb is None
    kb = kb or KnowledgeBase.open(settings)
    findings: list[Finding] = []
    try:
        if postgres_url(settings) is None and not settings.catalog_path.exists():
            findings.append(Finding("catalog", str(settings.catalog_path), "ok", "nothing ingested yet"))
        else:
            catalog = check_catalog(kb)
            findings.append(catalog)
            if catalog.status == "ok":  # the other checks compare against the catalog
                findings.append(check_keyword_index(kb, repair))
                findings.extend(check_vectors(kb, repair))
        findings.append(check_checkpoints(settings, repair))
    finally:
        if owned:
            kb.close()
    return DoctorReport(findings, stored_self_tests(settings), cleared, calibrator_status(settings))


def doctor(
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help=(
                "Rebuild the keyword index, damaged collections and missing vectors from the catalog; "
                "move damaged checkpoints aside."
            ),
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    clear_self_tests: Annotated[
        bool,
        typer.Option(
            "--clear-self-tests",
            help="Forget the stored model self-test verdicts (the next question tests its model again).",
        ),
    ] = False,
) -> None:
    """Check the catalog, keyword index, each collection's vectors and checkpoints; --repair rebuilds what the
    catalog can rebuild and moves a damaged checkpoint file aside (kept).

    Exit codes: 0 = every store healthy (or repaired); 1 = a store is still damaged or cannot be opened;
    2 = invalid settings or options."""
    from service.cli.common import EXIT_UNAVAILABLE, console, settings_or_exit, user_errors

    settings = settings_or_exit()
    with user_errors():
        report = run_doctor(settings, repair=repair, clear_self_tests=clear_self_tests)
    if as_json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2) + "\n")
    else:
        for finding in report.findings:
            style = {"ok": "green", "damaged": "bold red", "repaired": "yellow"}[finding.status]
            console.print(
                f"[{style}]{finding.status:<8}[/] {finding.store}: {escape(finding.detail)}",
                highlight=False,
                soft_wrap=True,
                markup=True,
            )
        if report.cleared_self_tests is not None:
            console.print(f"cleared {report.cleared_self_tests} stored model self-test verdict(s)")
        for verdict in report.self_tests:
            console.print(
                f"self-test {escape(str(verdict['model']))}: {verdict['strength']} "
                f"({escape(str(verdict['reason']))}, {verdict['tested_at']})",
                highlight=False,
                soft_wrap=True,
            )
        calibration = report.calibrator
        line = f"calibrator {calibration['calibrator']} for {calibration['model']}"
        if calibration["warning"]:
            line = f"[yellow]warning[/] {escape(line)}: {escape(str(calibration['warning']))}"
        console.print(line, highlight=False, soft_wrap=True)
    if not report.healthy:
        raise typer.Exit(EXIT_UNAVAILABLE)

"""`rag stats` without a server: the figures of the recorded answers, read from the audit table.

What it reports: per-strategy average time and confidence, the model and configuration, token cost when prices
are set, per tenant, with no server running. Each answer's audit row now carries its id, strategy,
confidence, model and token counts (revision 0004); rows written before keep NULLs and count as unknown.
Expected figures are computed by hand from the rows the tests write, not by the code under test.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from graphs.rag import build_graph
from persistence.answer_stats import UNKNOWN, Prices, answer_stats
from persistence.audit import TurnRecord, record_turn_rows
from persistence.database import APP_DB_FILENAME, Database, close_databases, open_database, upgrade
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app as cli_app
from state.context import Context
from tests.helpers.api_server import free_port
from tests.helpers.rag_world import ANSWER, QUESTION, World, world


@pytest.fixture
def acme(settings: Any, kb: KnowledgeBase, tmp_path: Path) -> Iterator[World]:
    """The corpus of tenant `acme`, the fake model installed."""
    with world(settings, kb, tmp_path, tenants=("acme",)) as built:
        yield built


def audit(db_file: Path) -> list[dict[str, Any]]:
    """The audit rows, read with plain SQL (outside the engine under test)."""
    with sqlite3.connect(db_file) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute("SELECT * FROM audit_logs ORDER BY id")]


# --- what an answer's audit row records ------------------------------------------------------------------


def test_an_answer_is_recorded_with_its_id_strategy_and_model(acme: World) -> None:
    out = build_graph().invoke({"question": QUESTION}, context=Context(tenant="acme"))
    assert out["answer"] == ANSWER and out["answer_id"]
    (row,) = audit(acme.settings.data_dir / APP_DB_FILENAME)
    assert row["answer_id"] == out["answer_id"] == json.loads(row["detail"])["turn_id"]
    assert row["strategy"] == out["strategy"] and row["strategy"]
    assert row["model"] == acme.settings.llm_model
    # the fake model reports no usage: its prompt is counted with the engine's tokenizer (the system prompt
    # alone is hundreds of tokens) and each streamed piece is a token; the confidence is the calibrated one
    # (the tests' calibrator gives every answer 0.9, tests/helpers/calibrators.py)
    assert row["prompt_tokens"] > 100 and row["completion_tokens"] >= 1
    assert row["confidence"] == out["confidence"] == 0.9
    overridden = build_graph().invoke(
        {"question": QUESTION}, context=Context(tenant="acme", model="other-model")
    )
    assert audit(acme.settings.data_dir / APP_DB_FILENAME)[-1]["model"] == "other-model"
    assert overridden["answer_id"] not in ("", out["answer_id"])


def test_a_turn_that_is_not_recorded_has_no_answer_id(
    settings: Any, kb: KnowledgeBase, tmp_path: Path
) -> None:
    with world(settings.model_copy(update={"record_turns": False}), kb, tmp_path):
        out = build_graph().invoke({"question": QUESTION})
    assert out["answer"] == ANSWER and out["answer_id"] == ""


# --- the figures -----------------------------------------------------------------------------------------

OLD_ROW = (
    "INSERT INTO audit_logs (action, tenant, thread_id, conversation_id, chunk_ids, mode, interface, graph, "
    "cache_hit, not_found, latency_ms, detail, created_at) VALUES ('answer', 'acme', 'old', '', '[]', "
    "'simple', 'cli', 'rag', 0, 1, 40.0, '{\"strategy\": \"HYBRID\"}', '2026-01-01 00:00:00')"
)


def record(database: Database, tenant: str, strategy: str, latency: float, **fields: Any) -> str:
    turn = TurnRecord(
        tenant=tenant,
        thread_id=f"t-{tenant}",
        question="q",
        answer="a",
        strategy=strategy,
        latency_ms=latency,
        **fields,
    )
    return record_turn_rows(turn, database)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    """A database first written at revision 0003 (one answer without the new columns), brought to head,
    then three answers recorded by the engine: two HYBRID of acme, one DIRECT of globex."""
    db_file = tmp_path / "stats.sqlite"
    engine = create_engine(f"sqlite:///{db_file}")
    upgrade(engine, "0003")
    with engine.begin() as connection:
        connection.execute(text(OLD_ROW))
    engine.dispose()
    opened = open_database(f"sqlite:///{db_file}")
    record(
        opened,
        "acme",
        "HYBRID",
        100.0,
        confidence=-0.2,
        model="m1",
        prompt_tokens=1000,
        completion_tokens=100,
    )
    record(
        opened, "acme", "HYBRID", 300.0, model="m1", prompt_tokens=3000, completion_tokens=300, cache_hit=True
    )
    record(
        opened, "globex", "DIRECT", 50.0, confidence=-1.0, model="m2", prompt_tokens=500, completion_tokens=0
    )
    try:
        yield opened
    finally:
        opened.close()


def test_old_rows_keep_nulls_and_count_as_unknown(database: Database) -> None:
    figures = answer_stats(database)
    assert (figures["answers"], figures["not_found"], figures["cache_hits"]) == (4, 1, 1)
    assert figures["strategies"][UNKNOWN] == {
        "answers": 1,
        "mean_latency_ms": 40.0,
        "latency_measured": 1,
        "mean_confidence": None,
        "confidence_measured": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "tokens_measured": 0,
        "feedback_up": 0,
        "feedback_down": 0,
    }
    assert figures["models"] == {"m1": 2, "m2": 1, UNKNOWN: 1}
    assert figures["tokens"] == {"prompt": 4500, "completion": 400, "measured": 3}
    assert "cost" not in figures and "cost" not in figures["strategies"]["HYBRID"]


def test_per_strategy_means_and_cost_by_hand(database: Database) -> None:
    figures = answer_stats(database, prices=Prices(prompt_per_1k=0.5, completion_per_1k=2.0))
    hybrid = figures["strategies"]["HYBRID"]
    assert (hybrid["answers"], hybrid["mean_latency_ms"]) == (2, 200.0)  # (100 + 300) / 2
    assert (hybrid["mean_confidence"], hybrid["confidence_measured"]) == (-0.2, 1)  # one measured
    assert hybrid["cost"] == pytest.approx(4000 / 1000 * 0.5 + 400 / 1000 * 2.0)  # 2.8
    assert figures["strategies"]["DIRECT"]["cost"] == pytest.approx(0.25)
    assert figures["cost"] == pytest.approx(3.05)
    only_prompt = answer_stats(database, prices=Prices(prompt_per_1k=1.0))
    assert only_prompt["cost"] == pytest.approx(4.5)  # the unset completion price counts 0


def test_one_tenants_figures(database: Database) -> None:
    acme = answer_stats(database, tenant="acme")
    assert acme["tenant"] == "acme" and acme["answers"] == 3
    assert set(acme["strategies"]) == {"HYBRID", UNKNOWN} and acme["models"] == {"m1": 2, UNKNOWN: 1}
    globex = answer_stats(database, tenant="globex")
    assert globex["answers"] == 1 and globex["strategies"]["DIRECT"]["mean_latency_ms"] == 50.0
    assert answer_stats(database, tenant="nobody")["answers"] == 0


# --- rag stats -------------------------------------------------------------------------------------------


def rag(env: dict[str, str], *arguments: str) -> Any:
    return CliRunner().invoke(cli_app, ["stats", *arguments], env=env)


@pytest.fixture
def recorded(acme: World) -> dict[str, str]:
    """Two answers of acme recorded through the graph; the CLI's environment on their data folder, with the
    default API address pointing at a port nobody listens on."""
    for _ in range(2):
        build_graph().invoke({"question": QUESTION}, context=Context(tenant="acme"))
    close_databases()
    return {"RAG_DATA_DIR": str(acme.settings.data_dir), "RAG_API_PORT": str(free_port())}


def test_rag_stats_local_reads_the_tables(recorded: dict[str, str]) -> None:
    result = rag(recorded, "--local", "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["source"] == "tables" and figures["answers"] == 2 and figures["tenant"] is None
    (strategy,) = figures["strategies"].values()
    assert strategy["answers"] == 2 and strategy["mean_latency_ms"] > 0
    assert figures["configuration"]["llm_model"] in figures["models"]
    assert figures["index"] == {"documents": 2, "chunks": 2}
    assert "cost" not in figures and figures["configuration"]["price_prompt_per_1k"] is None
    priced = rag({**recorded, "RAG_PRICE_PROMPT_PER_1K": "0.5"}, "--local", "--json")
    # the fake model reports no usage, so its prompts are the engine's own count; completions are free here
    assert json.loads(priced.stdout)["cost"] == pytest.approx(strategy["prompt_tokens"] / 1000 * 0.5)
    assert strategy["prompt_tokens"] > 0


def test_rag_stats_without_a_server_falls_back_to_the_tables(recorded: dict[str, str]) -> None:
    result = rag(recorded, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["answers"] == 2
    assert "figures from the tables instead" in result.stderr and len(result.stderr.splitlines()) == 1
    # a server the user named that does not answer is still an error: its figures were asked for
    down = rag(recorded, "--url", "http://127.0.0.1:9")
    assert down.exit_code == 1 and "cannot read" in down.stderr


def test_rag_stats_of_one_tenant_and_as_a_table(recorded: dict[str, str]) -> None:
    other = json.loads(rag(recorded, "--tenant", "globex", "--json").stdout)
    assert other["answers"] == 0 and other["index"] == {"documents": 0, "chunks": 0}
    shown = rag({**recorded, "RAG_PRICE_COMPLETION_PER_1K": "2", "COLUMNS": "200"}, "--tenant", "acme")
    assert shown.exit_code == 0, shown.output
    assert "tenant acme" in shown.stdout and "cost" in shown.stdout and "setting llm_model" in shown.stdout
    assert "cost" not in rag({**recorded, "COLUMNS": "200"}, "--local").stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--tenant", "../etc"), "--tenant"),
        (("--local", "--url", "http://127.0.0.1:9"), "--url reads a server's metrics"),
    ],
)
def test_rag_stats_bad_options_are_one_line(
    recorded: dict[str, str], arguments: tuple[str, ...], message: str
) -> None:
    result = rag(recorded, *arguments)
    assert result.exit_code == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1

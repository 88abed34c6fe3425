"""`rag eval latency` with fake models: the report's accounting adds up and names the model that ran."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from config.settings import Settings
from evals.latency import run_latency_eval
from models.local_catalog import CATALOG
from nodes.resources import Resources
from service.cli import app
from tests.fakes import StreamingTaskModel, TaskChatModel, fake_resources_factory

REPLY = "Answer: the sample corpus [1]."


def test_latency_report_times_each_question_and_names_the_configured_local_model(
    make_settings: Callable[..., Settings],
) -> None:
    """The report once named SmolLM2 whatever model ran; it must name the configured one."""
    model = TaskChatModel(replies={"generate": REPLY, "chat": REPLY})
    for local_model in ("qwen2.5-coder-0.5b", "smollm2-135m"):
        settings = make_settings(local_model=local_model)
        report = run_latency_eval(settings, questions=3, resources=fake_resources_factory(model))
        assert report["questions"] == 3
        assert report["model"] == f"{CATALOG[local_model].file_name} (embedded)"
        assert report["llm_calls_per_question"] >= 1
        assert "generate" in report["per_node_ms"] and "retrieve" in report["per_node_ms"]
        assert report["wall_s"] >= report["model_s"] + report["retrieval_s"] - 0.01
        assert 0.0 <= report["overhead_fraction"] <= 1.0


def test_latency_runs_with_the_answer_cache_off_even_where_the_user_has_it_on(
    make_settings: Callable[..., Settings],
) -> None:
    """The warm-up asks the first question before the timed ones; with the cache on, that question could come
    back from the cache and time no graph at all."""
    model = TaskChatModel(replies={"generate": REPLY, "chat": REPLY})
    seen: list[Settings] = []

    def recording(settings: Settings) -> Resources:
        seen.append(settings)
        return fake_resources_factory(model)(settings)

    user_settings = make_settings(cache_enabled=True)
    run_latency_eval(user_settings, questions=1, resources=recording)
    assert [settings.cache_enabled for settings in seen] == [False]
    assert seen[0].data_dir == user_settings.data_dir / "eval" / "latency"


def test_latency_reports_the_time_to_the_first_streamed_answer_token(
    make_settings: Callable[..., Settings],
) -> None:
    model = StreamingTaskModel(replies={"generate": REPLY, "chat": REPLY})
    report = run_latency_eval(make_settings(), questions=2, resources=fake_resources_factory(model))
    assert report["questions_with_streamed_answer"] == 2
    assert 0 < report["first_token_ms_p50"] <= report["wall_ms_p50"]
    assert report["targets"] == {"wall_p50_s": 15.0, "first_token_p50_s": 5.0}


def test_latency_runs_on_the_users_corpus_and_questions(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    """`rag eval latency --corpus --questions-file`: the user's questions, asked of their files."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "kiln.md").write_text("# Kiln\n\nThe Orvell kiln fires porcelain at 1,300 degrees.\n")
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question": "How hot does the Orvell kiln fire?"}) + "\n")
    model = TaskChatModel(replies={"generate": REPLY, "chat": REPLY})
    report = run_latency_eval(
        make_settings(),
        questions=2,
        corpus=corpus,
        questions_file=questions,
        resources=fake_resources_factory(model),
    )
    assert report["questions"] == 2
    asked = [" ".join(str(m.content) for m in prompt) for prompt in model.prompts("generate")]
    assert asked and all("Orvell kiln fire?" in text and "1,300 degrees" in text for text in asked)


def test_latency_command_names_a_missing_corpus_or_questions_file(tmp_path: Path) -> None:
    for option in ("--corpus", "--questions-file"):
        result = CliRunner().invoke(app, ["eval", "latency", option, str(tmp_path / "missing")])
        assert result.exit_code == 2
        assert f"not found: {tmp_path / 'missing'} ({option})" in result.output

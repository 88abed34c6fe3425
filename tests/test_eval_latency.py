"""`rag eval latency` with fake models: the report's accounting adds up and names the model that ran."""

from __future__ import annotations

from collections.abc import Callable

from config.settings import Settings
from evals.latency import run_latency_eval
from models.local_catalog import CATALOG
from nodes.resources import Resources
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

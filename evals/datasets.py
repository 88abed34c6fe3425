"""Loaders for the evaluation datasets (BEIR, SQuAD / CMRC 2018, HotpotQA) into plain dataclasses.

Readers take plain or gzip files (by magic bytes: the shared data is compressed, test fixtures are not).
Malformed input fails naming file and line: an evaluation silently run on half a dataset is worse than none.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"
#: Qrels column header of the BEIR release; its first field is never a query id.
_QRELS_HEADER_FIRST_FIELD = "query-id"
_QRELS_COLUMNS = 3
#: Suffixes tried, in order, for each BEIR file: the plain file first, then its gzip.
_BEIR_SUFFIXES = ("", ".gz")
BEIR_CORPUS_NAME = "corpus.jsonl"
BEIR_QUERIES_NAME = "queries.jsonl"
BEIR_QRELS_DIR = "qrels"
DEFAULT_BEIR_SPLIT = "test"
LANGUAGE_ENGLISH = "en"
LANGUAGE_CHINESE = "zh"
#: The CMRC file of the shared-data layout that `rag eval router --data-dir DIR` reads, relative to DIR.
CMRC_FILE = Path("cmrc2018") / "cmrc2018_dev.json.gz"


@dataclass(frozen=True)
class Passage:
    """One retrievable unit of an evaluation corpus: a BEIR document, a SQuAD or HotpotQA paragraph."""

    passage_id: str
    title: str
    text: str


@dataclass
class QAExample:
    """One question with its gold answers and the passages it is asked over."""

    qid: str
    question: str
    answers: list[str]
    """Gold answer texts, deduplicated in order; empty for an unanswerable (SQuAD v2) question."""
    passages: list[Passage]
    """The question's own context (its SQuAD paragraph, its HotpotQA distractor set); may be empty."""
    supporting: set[str]
    """Passage ids of the gold evidence."""
    kind: str | None
    """Question type where the dataset has one (HotpotQA: "bridge" or "comparison")."""
    language: str
    answerable: bool = True
    """False for a SQuAD 2.0 question its paragraph does not answer: the right reply is "not found"."""

    @property
    def supporting_available(self) -> set[str]:
        """Gold passages present among `passages` (the HotpotQA sample lacks some)."""
        return self.supporting & {passage.passage_id for passage in self.passages}


@dataclass
class BeirDataset:
    """A BEIR split: the corpus stays on disk (it can be large), queries and qrels are in memory."""

    corpus_path: Path
    queries: dict[str, str]
    """Query id -> text, restricted to the queries judged in the split's qrels."""
    qrels: dict[str, dict[str, int]]
    """Query id -> document id -> relevance grade."""
    name: str = ""
    split: str = DEFAULT_BEIR_SPLIT


def open_text(path: Path) -> IO[str]:
    """Open `path` for reading UTF-8 text, gunzipping it when it starts with the gzip magic bytes."""
    with path.open("rb") as probe:
        compressed = probe.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC
    if compressed:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return path.open(encoding="utf-8")


def read_questions(path: Path) -> list[str]:
    """The "question" field of every line of a JSONL file (the samples' questions.jsonl)."""
    return [str(_field(record, "question", path, line)) for line, record in _iter_jsonl(path)]


def _require_file(path: Path) -> Path:
    """`path` itself, or FileNotFoundError naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"missing file: {path}")
    return path


def _parse_json_line(line: str, path: Path, line_number: int) -> Any:
    """One JSONL record, or ValueError naming the file and line."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{line_number}: invalid JSON ({error.msg})") from error


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, record) for every non-blank line of a JSONL file."""
    with open_text(path) as handle:
        for line_number, line in enumerate(handle, start=1):
            if line.strip():
                yield line_number, _parse_json_line(line, path, line_number)


def _field(record: Any, key: str, path: Path, line_number: int) -> Any:
    """`record[key]`, or ValueError naming the file, line and missing key."""
    if not isinstance(record, dict) or key not in record:
        raise ValueError(f"{path}:{line_number}: record has no {key!r} field")
    return record[key]


def _find_beir_file(folder: Path, name: str) -> Path:
    """`folder/name` or its .gz; FileNotFoundError listing both candidates when neither exists."""
    candidates = [folder / f"{name}{suffix}" for suffix in _BEIR_SUFFIXES]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"missing BEIR file: none of {', '.join(str(path) for path in candidates)}")


def read_beir_queries(path: Path) -> dict[str, str]:
    """Query id -> text from a BEIR queries.jsonl(.gz)."""
    queries: dict[str, str] = {}
    for line_number, record in _iter_jsonl(_require_file(path)):
        query_id = str(_field(record, "_id", path, line_number))
        queries[query_id] = str(_field(record, "text", path, line_number))
    return queries


def read_beir_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id -> doc id -> grade from a BEIR qrels TSV (`query-id  corpus-id  score`, header optional)."""
    qrels: dict[str, dict[str, int]] = {}
    with open_text(_require_file(path)) as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = [value.strip() for value in line.rstrip("\r\n").split("\t")]
            if line_number == 1 and row[0] == _QRELS_HEADER_FIRST_FIELD:
                continue
            if len(row) != _QRELS_COLUMNS:
                raise ValueError(
                    f"{path}:{line_number}: expected {_QRELS_COLUMNS} tab-separated fields: {line!r}"
                )
            query_id, doc_id, grade = row
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(grade)
            except ValueError as error:
                raise ValueError(f"{path}:{line_number}: score {grade!r} is not an integer") from error
    return qrels


def load_beir(folder: Path, split: str = DEFAULT_BEIR_SPLIT) -> BeirDataset:
    """A BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), queries restricted to the
    judged ones as BEIR does; a judged query missing from queries.jsonl is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"missing BEIR folder: {folder}")
    corpus_path = _find_beir_file(folder, BEIR_CORPUS_NAME)
    all_queries = read_beir_queries(_find_beir_file(folder, BEIR_QUERIES_NAME))
    qrels = read_beir_qrels(_find_beir_file(folder / BEIR_QRELS_DIR, f"{split}.tsv"))
    missing = [query_id for query_id in qrels if query_id not in all_queries]
    if missing:
        raise ValueError(f"{len(missing)} judged queries are not in {BEIR_QUERIES_NAME}, e.g. {missing[:5]}")
    queries = {query_id: all_queries[query_id] for query_id in qrels}
    return BeirDataset(corpus_path=corpus_path, queries=queries, qrels=qrels, name=folder.name, split=split)


def _read_json_document(path: Path) -> Any:
    """A whole-file JSON document, or ValueError naming the file and position."""
    with open_text(_require_file(path)) as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from error


def load_squad(path: Path, language: str = LANGUAGE_ENGLISH) -> list[QAExample]:
    """Questions of a SQuAD v1/v2-format file, each over its own paragraph (id: the paragraph's "id", else
    "<title>#<index>"; one id for two paragraphs is an error). Unanswerable questions (`is_impossible` or
    no answer) are kept with no gold answer: their paragraph is the near miss the engine must decline."""
    path = Path(path)
    document = _read_json_document(path)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ValueError(f"{path}: not a SQuAD-format file (no top-level 'data' list)")
    examples: list[QAExample] = []
    texts_by_passage_id: dict[str, str] = {}
    for article_index, article in enumerate(document["data"]):
        title = str(article.get("title") or "")
        for paragraph_index, paragraph in enumerate(article.get("paragraphs", [])):
            passage_id = str(paragraph.get("id") or f"{title or article_index}#{paragraph_index}")
            passage = Passage(passage_id=passage_id, title=title, text=str(paragraph["context"]))
            known_text = texts_by_passage_id.setdefault(passage_id, passage.text)
            if known_text != passage.text:
                raise ValueError(f"{path}: paragraph id {passage_id!r} is used for two different paragraphs")
            for qa in paragraph.get("qas", []):
                answers = list(dict.fromkeys(str(answer["text"]) for answer in qa.get("answers") or []))
                answerable = not qa.get("is_impossible") and bool(answers)
                examples.append(
                    QAExample(
                        qid=str(qa["id"]),
                        question=str(qa["question"]),
                        answers=answers if answerable else [],
                        passages=[passage],
                        supporting={passage_id},
                        kind=None,
                        language=language,
                        answerable=answerable,
                    )
                )
    return examples


def load_cmrc(path: Path) -> list[QAExample]:
    """CMRC 2018 (SQuAD format, Chinese): passage id = paragraph id, title = article title."""
    return load_squad(path, language=LANGUAGE_CHINESE)


def cmrc_as_retrieval(path: Path) -> tuple[list[Passage], dict[str, str], dict[str, dict[str, int]]]:
    """CMRC 2018 as a retrieval task: (all paragraphs, question id -> text, question id -> {paragraph: 1})."""
    examples = load_cmrc(path)
    passages = pool_passages(examples)
    queries = {example.qid: example.question for example in examples}
    qrels = {example.qid: dict.fromkeys(example.supporting, 1) for example in examples}
    return passages, queries, qrels


def _read_json_array_or_lines(path: Path) -> list[Any]:
    """Records of a JSON array file or a JSONL file (the original HotpotQA release is an array)."""
    with open_text(_require_file(path)) as handle:
        text = handle.read()
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from error
        return list(records)
    return [
        _parse_json_line(line, path, line_number)
        for line_number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]


def _hotpot_example(record: Any, path: Path, position: int) -> QAExample:
    """One HotpotQA record; paragraph text is its sentences joined by single spaces."""
    if not isinstance(record, dict):
        raise ValueError(f"{path}: record {position} is not a JSON object")
    try:
        passages = [
            Passage(
                passage_id=str(title),
                title=str(title),
                text=" ".join(sentence.strip() for sentence in sentences if sentence.strip()),
            )
            for title, sentences in record.get("context") or []
        ]
        return QAExample(
            qid=str(record["_id"]),
            question=str(record["question"]),
            answers=[str(record["answer"])],
            passages=passages,
            supporting={str(title) for title, _sentence_id in record.get("supporting_facts") or []},
            kind=record.get("type"),
            language=LANGUAGE_ENGLISH,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: record {position} is not a HotpotQA question ({error!r})") from error


def load_hotpotqa(path: Path) -> list[QAExample]:
    """HotpotQA questions (JSON array or JSONL): passages are the context paragraphs keyed by title,
    supporting the supporting facts' titles; questions without context are kept (the published count)."""
    path = Path(path)
    return [
        _hotpot_example(record, path, position)
        for position, record in enumerate(_read_json_array_or_lines(path), start=1)
    ]


def pool_passages(examples: Iterable[QAExample]) -> list[Passage]:
    """Every passage of every example once per id, in first-seen order (a clash of texts is logged)."""
    pooled: dict[str, Passage] = {}
    for example in examples:
        for passage in example.passages:
            known = pooled.setdefault(passage.passage_id, passage)
            if known.text != passage.text:
                logger.warning("passage id %r has two different texts; keeping the first", passage.passage_id)
    return list(pooled.values())


def write_records_jsonl(passages: Iterable[Passage], path: Path) -> int:
    """Write passages as {"_id", "title", "text"} UTF-8 JSON lines (ingestion's format); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for passage in passages:
            record = {"_id": passage.passage_id, "title": passage.title, "text": passage.text}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count

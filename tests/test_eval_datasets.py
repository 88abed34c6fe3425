"""Dataset loaders on small fixtures in every accepted format, plus the real shared files when present."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.data import iter_beir_corpus
from evals.datasets import (
    LANGUAGE_CHINESE,
    LANGUAGE_ENGLISH,
    Passage,
    QAExample,
    cmrc_as_retrieval,
    load_beir,
    load_cmrc,
    load_hotpotqa,
    load_squad,
    pool_passages,
    write_records_jsonl,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# Published counts (shared/data/README.md).
SCIFACT_TEST_QUERIES = 300
SCIFACT_TEST_QRELS_ROWS = 339
SCIFACT_CORPUS_DOCS = 5183
HOTPOT_QUESTIONS = 500
HOTPOT_BRIDGE = 371
HOTPOT_COMPARISON = 129
HOTPOT_WITHOUT_CONTEXT = {"5a83ed9b55429933447460b8", "5ab69f13554299710c8d1ef3"}
CMRC_QUESTIONS = 3219
CMRC_CONTEXTS = 848


def _write(path: Path, text: str, compress: bool) -> Path:
    """Write `text` to `path` (plus .gz, gzipped, when `compress`); returns the written path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _jsonl(records: list[dict[str, Any]]) -> str:
    """Records as JSON lines (ASCII-escaped, as the BEIR files are)."""
    return "".join(json.dumps(record) + "\n" for record in records)


# --------------------------------------------------------------------------------------------------------
# BEIR


def _beir_folder(root: Path, compress: bool, qrels_text: str | None = None) -> Path:
    """A three-document BEIR folder; query q9 exists but is not judged in the test split."""
    folder = root / "tiny-beir"
    corpus = [
        {"_id": "d1", "title": "Alpha", "text": "alpha text", "metadata": {}},
        {"_id": "d2", "title": "", "text": "beta text", "metadata": {}},
        {"_id": "d3", "title": "Gamma", "text": "gamma text", "metadata": {}},
    ]
    queries = [
        {"_id": "q1", "text": "about alpha", "metadata": {}},
        {"_id": "q2", "text": "about beta", "metadata": {}},
        {"_id": "q9", "text": "not judged", "metadata": {}},
    ]
    qrels = qrels_text or "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\td3\t0\n"
    _write(folder / "corpus.jsonl", _jsonl(corpus), compress)
    _write(folder / "queries.jsonl", _jsonl(queries), compress)
    _write(folder / "qrels" / "test.tsv", qrels, compress)
    return folder


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
def test_load_beir(tmp_path: Path, compress: bool) -> None:
    dataset = load_beir(_beir_folder(tmp_path, compress))
    assert dataset.queries == {"q1": "about alpha", "q2": "about beta"}  # q9 is not in the qrels
    assert dataset.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}
    assert dataset.corpus_path.name == ("corpus.jsonl.gz" if compress else "corpus.jsonl")
    assert dataset.split == "test"
    documents = list(iter_beir_corpus(dataset.corpus_path))
    assert documents[0] == Passage(passage_id="d1", title="Alpha", text="alpha text")
    assert [document.passage_id for document in documents] == ["d1", "d2", "d3"]


def test_load_beir_qrels_without_header(tmp_path: Path) -> None:
    dataset = load_beir(_beir_folder(tmp_path, compress=False, qrels_text="q1\td1\t1\n\n"))
    assert dataset.qrels == {"q1": {"d1": 1}}


def test_load_beir_missing_folder_or_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_beir(tmp_path / "nowhere")
    folder = _beir_folder(tmp_path, compress=False)
    (folder / "qrels" / "test.tsv").unlink()
    with pytest.raises(FileNotFoundError, match="test.tsv"):
        load_beir(folder)
    with pytest.raises(FileNotFoundError, match="dev.tsv"):
        load_beir(folder, split="dev")
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="corpus.jsonl"):
        load_beir(folder)


def test_load_beir_bad_qrels_line(tmp_path: Path) -> None:
    folder = _beir_folder(
        tmp_path, compress=False, qrels_text="query-id\tcorpus-id\tscore\nq1\td1\t1\nq2 d2 1\n"
    )
    with pytest.raises(ValueError, match=r"test.tsv:3"):
        load_beir(folder)
    folder = _beir_folder(tmp_path, compress=False, qrels_text="q1\td1\thigh\n")
    with pytest.raises(ValueError, match=r"test.tsv:1: score 'high'"):
        load_beir(folder)


def test_load_beir_bad_queries(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, compress=False)
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "ok"}\n{not json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"queries.jsonl:2"):
        load_beir(folder)
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "ok"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"judged queries .*q2"):
        load_beir(folder)  # q2 is judged but has no text


# --------------------------------------------------------------------------------------------------------
# SQuAD / CMRC 2018


def _squad_document() -> dict[str, Any]:
    """Two articles; the first paragraph has an id (CMRC style), the second has none (SQuAD style)."""
    return {
        "version": "v1.0",
        "data": [
            {
                "id": "DEV_0",
                "title": "北京大学",
                "paragraphs": [
                    {
                        "id": "DEV_0",
                        "context": "北京大学创办于1898年。",
                        "qas": [
                            {
                                "id": "DEV_0_QUERY_0",
                                "question": "北京大学创办于哪一年？",
                                "answers": [
                                    {"text": "1898年", "answer_start": 7},
                                    {"text": "1898年", "answer_start": 7},
                                    {"text": "1898", "answer_start": 7},
                                ],
                            },
                            {
                                "id": "DEV_0_QUERY_1",
                                "question": "什么创办于1898年？",
                                "answers": [{"text": "北京大学", "answer_start": 0}],
                            },
                        ],
                    }
                ],
            },
            {
                "title": "Paris",
                "paragraphs": [
                    {
                        "context": "Paris is the capital of France.",
                        "qas": [
                            {"id": "s1", "question": "Capital of France?", "answers": [{"text": "Paris"}]}
                        ],
                    }
                ],
            },
        ],
    }


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
def test_load_cmrc(tmp_path: Path, compress: bool) -> None:
    path = _write(tmp_path / "cmrc.json", json.dumps(_squad_document(), ensure_ascii=False), compress)
    examples = load_cmrc(path)
    assert [example.qid for example in examples] == ["DEV_0_QUERY_0", "DEV_0_QUERY_1", "s1"]
    first = examples[0]
    assert first.question == "北京大学创办于哪一年？"
    assert first.answers == ["1898年", "1898"]  # duplicates of one annotation removed, order kept
    assert first.passages == [Passage(passage_id="DEV_0", title="北京大学", text="北京大学创办于1898年。")]
    assert first.supporting == {"DEV_0"}
    assert first.kind is None
    assert first.language == LANGUAGE_CHINESE
    assert examples[2].passages[0].passage_id == "Paris#0"  # no paragraph id: "<title>#<index>"


def test_load_squad_defaults_to_english(tmp_path: Path) -> None:
    path = _write(tmp_path / "squad.json", json.dumps(_squad_document()), compress=False)
    assert {example.language for example in load_squad(path)} == {LANGUAGE_ENGLISH}


def test_load_squad_rejects_bad_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="absent.json"):
        load_squad(tmp_path / "absent.json")
    not_squad = _write(tmp_path / "list.json", "[1, 2]", compress=False)
    with pytest.raises(ValueError, match="SQuAD"):
        load_squad(not_squad)
    document = _squad_document()
    document["data"][1]["paragraphs"][0]["id"] = "DEV_0"  # same id, different paragraph
    clash = _write(tmp_path / "clash.json", json.dumps(document), compress=False)
    with pytest.raises(ValueError, match="DEV_0"):
        load_squad(clash)


def _squad2_document() -> dict[str, Any]:
    """SQuAD 2.0 style (invented text): one paragraph with an answerable question, an `is_impossible` one
    with plausible answers, and one that lists no answer without the flag; a second paragraph holds only an
    unanswerable question."""
    return {
        "version": "v2.0",
        "data": [
            {
                "title": "Vellmar Lighthouse",
                "paragraphs": [
                    {
                        "context": "The Vellmar lighthouse was lit in 1872 by the keeper Orla Brenn.",
                        "qas": [
                            {
                                "id": "v-answerable",
                                "question": "Who lit the Vellmar lighthouse?",
                                "answers": [{"text": "Orla Brenn", "answer_start": 51}],
                                "is_impossible": False,
                            },
                            {
                                "id": "v-impossible",
                                "question": "Who put out the Vellmar lighthouse?",
                                "answers": [],
                                "plausible_answers": [{"text": "Orla Brenn", "answer_start": 51}],
                                "is_impossible": True,
                            },
                            {"id": "v-no-answers", "question": "How tall is it?", "answers": []},
                        ],
                    },
                    {
                        "context": "Its lamp burned whale oil until the harbour board bought a gas lamp.",
                        "qas": [
                            {
                                "id": "v-lamp",
                                "question": "What did the harbour board sell?",
                                "answers": [],
                                "plausible_answers": [{"text": "a gas lamp", "answer_start": 56}],
                                "is_impossible": True,
                            }
                        ],
                    },
                ],
            }
        ],
    }


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
def test_load_squad2_keeps_unanswerable_questions_without_gold_answers(
    tmp_path: Path, compress: bool
) -> None:
    path = _write(tmp_path / "squad2.json", json.dumps(_squad2_document()), compress)
    examples = {example.qid: example for example in load_squad(path)}
    assert list(examples) == ["v-answerable", "v-impossible", "v-no-answers", "v-lamp"]
    assert examples["v-answerable"].answerable and examples["v-answerable"].answers == ["Orla Brenn"]
    for qid in ("v-impossible", "v-no-answers", "v-lamp"):
        # plausible answers are not gold answers: an unanswerable question has none
        assert not examples[qid].answerable and examples[qid].answers == [], qid
    # the unanswerable question keeps its own paragraph, which the pooled corpus keeps too
    assert examples["v-lamp"].supporting == {"Vellmar Lighthouse#1"}
    pooled = pool_passages(examples.values())
    assert [passage.passage_id for passage in pooled] == ["Vellmar Lighthouse#0", "Vellmar Lighthouse#1"]
    assert pooled[1].text.startswith("Its lamp burned whale oil")


def test_examples_default_to_answerable(tmp_path: Path) -> None:
    path = _write(tmp_path / "squad.json", json.dumps(_squad_document()), compress=False)
    assert all(example.answerable for example in load_squad(path))
    path = _write(tmp_path / "hotpot.jsonl", _jsonl(_hotpot_records()), compress=False)
    assert all(example.answerable for example in load_hotpotqa(path))


def test_cmrc_as_retrieval(tmp_path: Path) -> None:
    path = _write(tmp_path / "cmrc.json", json.dumps(_squad_document()), compress=False)
    passages, queries, qrels = cmrc_as_retrieval(path)
    assert [passage.passage_id for passage in passages] == ["DEV_0", "Paris#0"]  # paragraph shared by 2 qs
    assert queries["DEV_0_QUERY_1"] == "什么创办于1898年？"
    assert qrels == {"DEV_0_QUERY_0": {"DEV_0": 1}, "DEV_0_QUERY_1": {"DEV_0": 1}, "s1": {"Paris#0": 1}}


# --------------------------------------------------------------------------------------------------------
# HotpotQA


def _hotpot_records() -> list[dict[str, Any]]:
    """A bridge question with leading-space sentences (as in HotpotQA), a comparison, one without context."""
    return [
        {
            "_id": "h1",
            "question": "Which city hosts the university X?",
            "answer": "Lawrence",
            "supporting_facts": [["University X", 0], ["Lawrence", 1]],
            "context": [
                ["University X", ["University X is a school.", " It is in Lawrence."]],
                ["Lawrence", ["Lawrence is a city.", " It is in Kansas."]],
                ["Distractor", ["Unrelated text."]],
            ],
            "type": "bridge",
            "level": "hard",
        },
        {
            "_id": "h2",
            "question": "Is Lawrence older than Y?",
            "answer": "yes",
            "supporting_facts": [["Lawrence", 0], ["Y", 0]],
            "context": [["Lawrence", ["Lawrence is a city.", " It is in Kansas."]]],
            "type": "comparison",
            "level": "hard",
        },
        {
            "_id": "h3",
            "question": "No context here?",
            "answer": "none",
            "supporting_facts": [["Z", 0]],
            "context": [],
            "type": "bridge",
            "level": "hard",
        },
    ]


@pytest.mark.parametrize("layout", ["array", "jsonl"])
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
def test_load_hotpotqa(tmp_path: Path, layout: str, compress: bool) -> None:
    records = _hotpot_records()
    text = json.dumps(records, indent=1) if layout == "array" else _jsonl(records)
    examples = load_hotpotqa(_write(tmp_path / "hotpot.json", text, compress))
    assert [example.qid for example in examples] == ["h1", "h2", "h3"]
    first = examples[0]
    assert first.answers == ["Lawrence"]
    assert first.kind == "bridge"
    assert first.language == LANGUAGE_ENGLISH
    assert first.supporting == {"University X", "Lawrence"}
    assert first.passages[0] == Passage(
        passage_id="University X", title="University X", text="University X is a school. It is in Lawrence."
    )
    assert len(first.passages) == 3
    assert examples[1].kind == "comparison"
    assert examples[1].supporting_available == {"Lawrence"}  # "Y" is not among its passages
    assert examples[2].passages == []  # kept, with no passages
    assert examples[2].supporting == {"Z"}


def test_load_hotpotqa_bad_records(tmp_path: Path) -> None:
    broken = _write(tmp_path / "broken.jsonl", _jsonl(_hotpot_records()[:1]) + "{oops\n", compress=False)
    with pytest.raises(ValueError, match=r"broken.jsonl:2"):
        load_hotpotqa(broken)
    record = _hotpot_records()[0]
    del record["question"]
    missing = _write(tmp_path / "missing.jsonl", _jsonl([record]), compress=False)
    with pytest.raises(ValueError, match="record 1"):
        load_hotpotqa(missing)


# --------------------------------------------------------------------------------------------------------
# Corpus building


def test_pool_passages_dedupes_by_id(tmp_path: Path) -> None:
    examples = load_hotpotqa(_write(tmp_path / "hotpot.jsonl", _jsonl(_hotpot_records()), compress=False))
    pooled = pool_passages(examples)
    assert [passage.passage_id for passage in pooled] == ["University X", "Lawrence", "Distractor"]


def test_pool_passages_keeps_first_text_on_clash() -> None:
    def example(qid: str, text: str) -> QAExample:
        passage = Passage(passage_id="p", title="P", text=text)
        return QAExample(qid, "q?", ["a"], [passage], {"p"}, None, LANGUAGE_ENGLISH)

    assert pool_passages([example("1", "first"), example("2", "second")])[0].text == "first"


def test_write_records_jsonl_round_trip(tmp_path: Path) -> None:
    passages = [Passage("DEV_0", "北京大学", "北京大学创办于1898年。"), Passage("p2", "", "plain")]
    path = tmp_path / "out" / "records.jsonl"
    assert write_records_jsonl(passages, path) == 2
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"_id": "DEV_0", "title": "北京大学", "text": "北京大学创办于1898年。"}
    assert "北京大学" in lines[0]  # UTF-8, not \u escapes
    assert list(iter_beir_corpus(path)) == passages  # the same layout as a BEIR corpus


# --------------------------------------------------------------------------------------------------------
# The real shared data (counts from shared/data/README.md)

needs_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} is absent")


@needs_shared_data
def test_real_scifact_counts() -> None:
    dataset = load_beir(SHARED_DATA / "beir-scifact")
    assert len(dataset.queries) == SCIFACT_TEST_QUERIES
    assert sum(len(judged) for judged in dataset.qrels.values()) == SCIFACT_TEST_QRELS_ROWS
    corpus_ids = {document.passage_id for document in iter_beir_corpus(dataset.corpus_path)}
    assert len(corpus_ids) == SCIFACT_CORPUS_DOCS
    assert all(doc_id in corpus_ids for judged in dataset.qrels.values() for doc_id in judged)


@needs_shared_data
def test_real_hotpotqa_counts() -> None:
    examples = load_hotpotqa(SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_sample500_amor.jsonl.gz")
    assert len(examples) == HOTPOT_QUESTIONS
    assert sum(example.kind == "bridge" for example in examples) == HOTPOT_BRIDGE
    assert sum(example.kind == "comparison" for example in examples) == HOTPOT_COMPARISON
    assert {example.qid for example in examples if not example.passages} == HOTPOT_WITHOUT_CONTEXT
    assert all(len(example.supporting) == 2 for example in examples)


@needs_shared_data
def test_real_cmrc_counts() -> None:
    path = SHARED_DATA / "cmrc2018" / "cmrc2018_dev.json.gz"
    examples = load_cmrc(path)
    assert len(examples) == CMRC_QUESTIONS
    assert all(example.answers for example in examples)
    passages, queries, qrels = cmrc_as_retrieval(path)
    assert len(passages) == CMRC_CONTEXTS
    assert len(queries) == len(qrels) == CMRC_QUESTIONS

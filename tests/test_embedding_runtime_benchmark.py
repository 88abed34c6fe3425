"""`python -m benchmarks.embedding_runtime`: the adoption rule and the SciFact subset it scores on (the
measurement itself loads both runtimes: run it by hand, results/embedding_runtime.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.embedding_runtime import verdict, write_subset
from evals.datasets import load_beir


def report(
    *, torch_s: float = 10.0, onnx_s: float = 2.0, ndcg: float = 0.80, rate: float = 10.0
) -> dict[str, Any]:
    """A report whose torch side has hybrid nDCG@10 0.80 and 10 chunks/s; the ONNX side as given."""
    return {
        "startup": {"torch": {"median_s": torch_s}, "onnx": {"median_s": onnx_s}},
        "scores": {
            "torch documents, torch queries": {"hybrid": {"ndcg@10": 0.80}},
            "onnx documents, onnx queries": {"hybrid": {"ndcg@10": ndcg}},
        },
        "encode": {"torch": {"chunks_per_s": 10.0}, "onnx": {"chunks_per_s": rate}},
    }


@pytest.mark.parametrize(
    ("changes", "adopt"),
    [
        ({}, True),
        ({"ndcg": 0.761, "rate": 8.01}, True),  # just inside both bounds (95% and 80%)
        ({"ndcg": 0.759}, False),  # more than 5% of the quality lost
        ({"rate": 7.9}, False),  # more than 20% of the encode rate lost
        ({"onnx_s": 10.5}, False),  # no faster start
    ],
)
def test_onnx_is_adopted_only_when_every_part_of_the_rule_holds(
    changes: dict[str, float], adopt: bool
) -> None:
    assert verdict(report(**changes))["adopt_onnx"] is adopt


def write_beir(folder: Path, documents: int, judged: dict[str, list[str]]) -> None:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as handle:
        for index in range(documents):
            handle.write(json.dumps({"_id": f"d{index}", "title": "", "text": f"text {index}"}) + "\n")
    with (folder / "queries.jsonl").open("w") as handle:
        for query in judged:
            handle.write(json.dumps({"_id": query, "text": f"question {query}"}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for query, docs in judged.items():
            handle.writelines(f"{query}\t{doc}\t1\n" for doc in docs)


def test_the_subset_keeps_every_judged_document_and_fills_up_with_distractors(tmp_path: Path) -> None:
    judged = {"q1": ["d3", "d40"], "q2": ["d77"]}
    write_beir(tmp_path / "full", 100, judged)
    subset = load_beir(write_subset(tmp_path / "full", 10, tmp_path / "subset"))
    ids = [json.loads(line)["_id"] for line in subset.corpus_path.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 10
    assert {"d3", "d40", "d77"} <= set(ids)
    assert subset.qrels == {"q1": {"d3": 1, "d40": 1}, "q2": {"d77": 1}}
    again = load_beir(write_subset(tmp_path / "full", 10, tmp_path / "again"))
    assert again.corpus_path.read_text() == subset.corpus_path.read_text()  # seeded: the same distractors

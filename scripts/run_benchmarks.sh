#!/usr/bin/env bash
# Rerun every benchmark whose results are committed under evals/results, then rebuild the report.
# Runs on the embedded defaults unless RAG_* variables point at another model or endpoint.
# Expects ../shared/data (the evaluation datasets) beside the checkout; takes about 1.5 hours on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA_DIR:-../shared/data}"
RESULTS=evals/results
RAG=.venv/bin/rag
HOTPOT="$DATA/hotpotqa/hotpot_dev_distractor_sample500_amor.jsonl.gz"
CMRC="$DATA/cmrc2018/cmrc2018_dev.json.gz"
N="${QA_LIMIT:-100}"

$RAG eval retrieval --dataset "$DATA/beir-scifact" --json "$RESULTS/retrieval_scifact.json"
$RAG eval retrieval --dataset "$CMRC" --json "$RESULTS/retrieval_cmrc2018.json"
$RAG eval router --json "$RESULTS/router.json"
$RAG eval latency --questions 50 --json "$RESULTS/latency.json"
for pipeline in naive agentic no-retrieval; do
  $RAG eval qa --dataset "$HOTPOT" --pipeline "$pipeline" --limit "$N" --json "$RESULTS/qa_hotpotqa_${pipeline}.json"
done
for pipeline in naive agentic; do
  $RAG eval qa --dataset "$CMRC" --pipeline "$pipeline" --limit "$N" --json "$RESULTS/qa_cmrc2018_${pipeline}.json"
done
$RAG eval report --results-dir "$RESULTS"

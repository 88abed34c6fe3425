#!/usr/bin/env bash
# The answer-quality runs of docs/answer-quality.md, each resumable from its per-question records
# under results/runs/, then the table (benchmarks/answer_table.py); the answer cache is off.
#   SQuAD 2.0 mixed (answerable + unanswerable), test half: whole chunks vs compressed evidence (naive),
#   agentic, and the 1.5B model; HotpotQA (the file's first questions, pooled corpus): naive vs agentic.
#   LIMIT=30 bash benchmarks/answer_campaign.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA:-../shared/data}"
SQUAD="data/squad/squad2_dev_mixed400.json.gz"
HOTPOTQA="$DATA/hotpotqa/hotpot_dev_distractor_sample500_amor.jsonl.gz"
CMRC="$DATA/cmrc2018/cmrc2018_dev.json.gz"
LIMIT="${LIMIT:-30}"
export RAG_CACHE_ENABLED=false

run() {  # run NAME DATASET PIPELINE [SPLIT]
  local name="$1" dataset="$2" pipeline="$3" split="${4:-all}"
  echo "== $(date -u +%H:%M:%S) $name --limit $LIMIT"
  .venv/bin/rag eval qa --dataset "$dataset" --pipeline "$pipeline" --split "$split" --limit "$LIMIT" \
    --pool all --results "results/runs/$name.jsonl" --json "results/qa_$name.json"
}

RAG_EVIDENCE_TOKEN_BUDGET=0 run wholechunks-squad-test-naive "$SQUAD" naive test
run compressed-squad-test-naive "$SQUAD" naive test
run compressed-squad-test-agentic "$SQUAD" agentic test
run compressed-squad-test-gold "$SQUAD" gold test  # the reader's ceiling: only each question's paragraph
RAG_LOCAL_MODEL=qwen2.5-coder-1.5b run compressed-1.5b-squad-test-naive "$SQUAD" naive test
run compressed-cmrc2018-test-naive "$CMRC" naive test
run compressed-cmrc2018-test-agentic "$CMRC" agentic test
run compressed-hotpotqa-naive "$HOTPOTQA" naive
run compressed-hotpotqa-agentic "$HOTPOTQA" agentic
.venv/bin/python -m benchmarks.answer_table results/runs/{wholechunks-squad-test-naive,compressed-squad-test-naive,compressed-squad-test-agentic,compressed-squad-test-gold,compressed-1.5b-squad-test-naive,compressed-cmrc2018-test-naive,compressed-cmrc2018-test-agentic,compressed-hotpotqa-naive,compressed-hotpotqa-agentic}.jsonl

#!/usr/bin/env bash
# The reported answer-quality runs (docs/answer-quality.md), each resumable from its per-question records under results/runs/:
#   1. HotpotQA, the file's first 300 questions (the same 300 as the whole-chunk runs of docs/benchmarks.md,
#      "before compression"), every question's paragraphs of the file pooled (4,920): naive and agentic with
#      the default embedded model and compressed evidence ("after"). The no-retrieval row is the earlier run
#      (results/qa_pooled_hotpotqa_no-retrieval.json): without documents, evidence compression changes nothing.
#   2. The agentic graph and no retrieval on the test halves of SQuAD 2.0 (mixed) and CMRC 2018, the same
#      questions as benchmarks/answer_campaign.sh's runs.
#   3. The strong paths on and off: Qwen2.5-Coder-1.5B served the way a user serves a model
#      (`rag model serve`, llama.cpp's OpenAI-compatible server on loopback), the agentic graph on the first
#      questions of HotpotQA's test half, RAG_LLM_STRENGTH=strong (LLM analysis, grading, rewriting) against
#      RAG_LLM_STRENGTH=weak (the heuristic analyser and score graders) on the same endpoint; and the naive
#      graph on the same questions and endpoint.
#   4. The strongest embedded model (Qwen2.5-Coder-1.5B) as the reader on stage 2's test halves, the agentic
#      graph with the weak paths as the default model gets them (the 1.5B passes the self-test for the strong
#      paths, which cost 5-10 calls and about 80 s a question here), so the default and the strongest
#      model read the same questions through the same graph; and the 1.5B's own ceiling on SQuAD (gold).
#      With NAIVE_TOO=1 (stage 2) also the naive graph and the reader's ceiling (gold: only each question's
#      own paragraph) on the same questions, so every row of a dataset's table comes from the same code;
#      (stage 1) also HotpotQA's ceiling (its two gold paragraphs).
# The answer cache is off. STAGES picks stages (default "1 2 3"; 4 only when named); LIMIT, SMALL_LIMIT
# and STRONG_LIMIT the question counts; PREFIX the records' names (default "reported":
# results/runs/reported-*.jsonl) and STRONG_PREFIX stage 3's (default "strong": results/runs/strong-*.jsonl);
# HOTPOT_SPLIT the HotpotQA half (default all: the first LIMIT questions of the file).
#   bash benchmarks/reported_campaign.sh
# The reported2 records (the code of commit a9e5541): SQuAD and CMRC test halves
# (60 questions each) agentic, naive and (SQuAD) the reader's ceiling; then HotpotQA's 144 test questions among
# the file's first 300 (the "test half" rows of the earlier runs), naive, agentic and no retrieval:
#   export PREFIX=reported2 NAIVE_TOO=1 SMALL_LIMIT=60 HOTPOT_SPLIT=test LIMIT=144
#   STAGES=2 bash benchmarks/reported_campaign.sh && STAGES=1 bash benchmarks/reported_campaign.sh
# The reported3 records (with the focused read, nodes/focused_read.py), on the same questions:
#   export PREFIX=reported3 NAIVE_TOO=1 SMALL_LIMIT=60 HOTPOT_SPLIT=test LIMIT=144 SMALL_DATA_DIR=/tmp/exp/data
#   STAGES=2 bash benchmarks/reported_campaign.sh && STAGES=1 bash benchmarks/reported_campaign.sh
# The strong paths after the focused read, on the first 24 of HotpotQA's test questions:
#   STRONG_PREFIX=strong3 STRONG_LIMIT=24 STAGES=3 bash benchmarks/reported_campaign.sh
# and the 1.5B reading stage 2's test questions:
#   PREFIX=reported3 SMALL_LIMIT=60 SMALL_DATA_DIR=/tmp/exp/data STAGES=4 bash benchmarks/reported_campaign.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/lib.sh  # DATASETS, serve_model_endpoint
HOTPOTQA="${DATASETS[hotpotqa]}"
LIMIT="${LIMIT:-300}"
STRONG_LIMIT="${STRONG_LIMIT:-8}"
STAGES="${STAGES:-1 2 3}"
SQUAD="${DATASETS[squad]}"
CMRC="${DATASETS[cmrc2018]}"
SMALL_LIMIT="${SMALL_LIMIT:-30}"
PORT="${PORT:-8093}"
PREFIX="${PREFIX:-reported}"
STRONG_PREFIX="${STRONG_PREFIX:-strong}"
HOTPOT_SPLIT="${HOTPOT_SPLIT:-all}"
# One index for every run: the pooled corpus does not depend on the pipeline or the model.
export RAG_DATA_DIR="${RAG_DATA_DIR:-/tmp/rag-reported}"
export RAG_CACHE_ENABLED=false
# The SQuAD and CMRC indexes (each dataset has its own under eval/, so one folder can hold them all).
SMALL_DATA_DIR="${SMALL_DATA_DIR:-$RAG_DATA_DIR}"

run() {  # run NAME PIPELINE SPLIT LIMIT [DATASET]
  local name="$1" pipeline="$2" split="$3" limit="$4" dataset="${5:-$HOTPOTQA}"
  echo "== $(date -u +%H:%M:%S) $name --split $split --limit $limit"
  .venv/bin/rag eval qa --dataset "$dataset" --pipeline "$pipeline" --split "$split" --limit "$limit" \
    --pool all --results "results/runs/$name.jsonl" --json "results/qa_$name.json"
}

if [[ " $STAGES " == *" 1 "* ]]; then
  run "$PREFIX-hotpotqa-naive" naive "$HOTPOT_SPLIT" "$LIMIT"
  run "$PREFIX-hotpotqa-agentic" agentic "$HOTPOT_SPLIT" "$LIMIT"
  if [ "$HOTPOT_SPLIT" != all ]; then  # the all-questions row is the earlier run (see above)
    run "$PREFIX-hotpotqa-no-retrieval" no-retrieval "$HOTPOT_SPLIT" "$LIMIT"
  fi
  if [ "${NAIVE_TOO:-0}" = 1 ]; then  # the reader's ceiling: each question's gold paragraphs only
    run "$PREFIX-hotpotqa-gold" gold "$HOTPOT_SPLIT" "$LIMIT"
  fi
fi

if [[ " $STAGES " == *" 2 "* ]]; then
  pipelines="agentic no-retrieval"
  if [ "${NAIVE_TOO:-0}" = 1 ]; then pipelines="agentic naive gold"; fi
  for pipeline in $pipelines; do
    RAG_DATA_DIR="$SMALL_DATA_DIR" run "$PREFIX-squad-test-$pipeline" "$pipeline" test "$SMALL_LIMIT" "$SQUAD"
  done
  for pipeline in ${pipelines/ gold/}; do  # CMRC's questions are all answerable: no ceiling run
    RAG_DATA_DIR="$SMALL_DATA_DIR" run "$PREFIX-cmrc2018-test-$pipeline" "$pipeline" test "$SMALL_LIMIT" "$CMRC"
  done
fi

if [[ " $STAGES " == *" 3 "* ]]; then
  serve_model_endpoint qwen2.5-coder-1.5b "$PORT" "$RAG_DATA_DIR/model-serve.log"
  RAG_LLM_STRENGTH=weak run "$STRONG_PREFIX-off-1.5b-hotpotqa-test-agentic" agentic test "$STRONG_LIMIT"
  RAG_LLM_STRENGTH=strong run "$STRONG_PREFIX-on-1.5b-hotpotqa-test-agentic" agentic test "$STRONG_LIMIT"
  RAG_LLM_STRENGTH=weak run "$STRONG_PREFIX-off-1.5b-hotpotqa-test-naive" naive test "$STRONG_LIMIT"
fi

if [[ " $STAGES " == *" 4 "* ]]; then
  (
    export RAG_LOCAL_MODEL=qwen2.5-coder-1.5b RAG_LLM_STRENGTH=weak RAG_DATA_DIR="$SMALL_DATA_DIR"
    run "$PREFIX-1.5b-squad-test-agentic" agentic test "$SMALL_LIMIT" "$SQUAD"
    run "$PREFIX-1.5b-cmrc2018-test-agentic" agentic test "$SMALL_LIMIT" "$CMRC"
    run "$PREFIX-1.5b-squad-test-gold" gold test "$SMALL_LIMIT" "$SQUAD"  # the 1.5B's own ceiling
  )
fi

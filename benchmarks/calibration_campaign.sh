#!/usr/bin/env bash
# The records behind the calibrated judgement (answering/calibrators/, docs/answer-quality.md): the naive graph
# with the embedded default reader on development and test halves of SQuAD 2.0 (mixed), CMRC 2018 and the
# HotpotQA sample. Rounds grow each run with --limit (records resume), so an interrupted campaign still has
# every set. The calibrator is fit on the dev records only (`rag eval calibrate --dev ...`) and reported on
# the test records.
#   bash benchmarks/calibration_campaign.sh            # ROUNDS="1 2 3" by default
# SETS picks the datasets (default "squad cmrc2018 hotpotqa"); SPLITS picks the halves (default "dev test"; the agentic graph runs on test only, after the fit:
#   PIPELINE=agentic SPLITS=test bash benchmarks/calibration_campaign.sh
# and the default calibrator on a served endpoint (the 1.5B standing in for a user's):
#   PREFIX=judge-endpoint-1.5b ENDPOINT_MODEL=qwen2.5-coder-1.5b SPLITS=test ROUNDS=1 bash benchmarks/calibration_campaign.sh
# PYTHON and RUNS let a frozen copy of the code run it while the checkout changes (records to $RUNS).
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/lib.sh  # DATASETS, serve_model_endpoint
SQUAD="${DATASETS[squad]}"
CMRC="${DATASETS[cmrc2018]}"
HOTPOTQA="${DATASETS[hotpotqa]}"
PREFIX="${PREFIX:-calib}"
PIPELINE="${PIPELINE:-naive}"
ROUNDS="${ROUNDS:-1 2 3}"
SPLITS="${SPLITS:-dev test}"
SETS="${SETS:-squad cmrc2018 hotpotqa}"
RUNS="${RUNS:-results/runs}"
export RAG_DATA_DIR="${RAG_DATA_DIR:-/tmp/rag-calib}"
export RAG_CACHE_ENABLED=false

run() {  # run SET DATASET POOL SPLIT LIMIT
  local set="$1" dataset="$2" pool="$3" split="$4" limit="$5"
  [[ " $SETS " == *" $set "* ]] || return 0
  echo "== $(date -u +%H:%M:%S) $set $split --limit $limit"
  "${PYTHON:-.venv/bin/python}" -m service.cli eval qa --dataset "$dataset" --pipeline "$PIPELINE" --split "$split" --limit "$limit" \
    --pool "$pool" --results "$RUNS/$PREFIX-$set-$split-$PIPELINE.jsonl" >/dev/null
}

# ENDPOINT_MODEL: the reader is that embedded model served by `rag model serve` (llama.cpp's OpenAI-compatible
# server on loopback), as a user's endpoint: judged by the default calibrator unless one names it.
if [[ -n "${ENDPOINT_MODEL:-}" ]]; then
  serve_model_endpoint "$ENDPOINT_MODEL" "${PORT:-8094}" "$RAG_DATA_DIR/model-serve.log"
fi

for round in $ROUNDS; do
  if [[ " $SPLITS " == *" dev "* ]]; then
    run squad "$SQUAD" all dev $((60 * round))
    run cmrc2018 "$CMRC" all dev $((80 * round))
    run hotpotqa "$HOTPOTQA" all dev $((60 * round))
  fi
  if [[ " $SPLITS " == *" test "* ]]; then
    run squad "$SQUAD" all test $((30 * round))
    run cmrc2018 "$CMRC" all test $((20 * round))
    run hotpotqa "$HOTPOTQA" all test $((20 * round))
  fi
done

# The committed form: slimmed and gzipped (what rag eval calibrate and benchmarks/judgement_plots.py read).
"${PYTHON:-.venv/bin/python}" -m benchmarks.slim_records "$RUNS"/"$PREFIX"-*-"$PIPELINE".jsonl

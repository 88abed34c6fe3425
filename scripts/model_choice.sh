#!/usr/bin/env bash
# The embedded default by rule (evals/model_choice.py): each embedded instruct model answers the same SQuAD 2.0
# development questions end to end (naive pipeline, compressed evidence), then `rag eval choose-model` applies
# the rule and writes results/model_choice.json; config/settings.py's DEFAULT_LOCAL_MODEL must name its choice
# (tests/test_model_choice.py). Run it on an idle machine: the rule reads the median seconds per answer.
#   LIMIT=20 bash scripts/model_choice.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SQUAD="data/squad/squad2_dev_mixed400.json.gz"
LIMIT="${LIMIT:-20}"
export RAG_CACHE_ENABLED=false
for model in smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do
  echo "== $(date -u +%H:%M:%S) $model"
  RAG_LOCAL_MODEL="$model" .venv/bin/rag eval qa --dataset "$SQUAD" --pipeline naive --split dev \
    --limit "$LIMIT" --pool all --results "results/runs/model-choice-$model.jsonl" \
    --json "results/qa_model-choice-$model.json"
done
.venv/bin/rag eval choose-model results/qa_model-choice-{smollm2-135m,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b}.json \
  --json results/model_choice.json

#!/usr/bin/env bash
# The embedded default by rule (benchmarks/model_choice.py): each embedded instruct model answers the same development
# questions of SQuAD 2.0, CMRC 2018 and HotpotQA end to end (naive pipeline, compressed evidence, each dataset's
# paragraphs pooled), then `python -m benchmarks choose-model` applies the rule and writes results/model_choice.json;
# config.settings.DEFAULT_LOCAL_MODEL must name its choice (tests/test_model_choice.py). Each run resumes
# from its per-question records. Run it on an idle machine: the rule reads the median seconds per answer.
# RUN_TAG names a fresh set of records (a re-measurement after a change); MODELS runs some models only, and
# the rule then reads every model's summaries of that tag found in results/.
#   RUN_TAG=focused-read LIMIT=40 bash benchmarks/model_choice.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT="${LIMIT:-40}"
ALL_MODELS=(smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
read -r -a MODELS <<< "${MODELS:-${ALL_MODELS[*]}}"
TAG="${RUN_TAG:+$RUN_TAG-}"
source benchmarks/lib.sh  # DATASETS
export RAG_CACHE_ENABLED=false
reports=()
for name in squad cmrc2018 hotpotqa; do
  for model in "${MODELS[@]}"; do
    echo "== $(date -u +%H:%M:%S) $name $model"
    RAG_LOCAL_MODEL="$model" .venv/bin/rag eval qa --dataset "${DATASETS[$name]}" --pipeline naive --split dev \
      --limit "$LIMIT" --pool all --results "results/runs/model-choice-$TAG$name-$model.jsonl" \
      --json "results/qa_model-choice-$TAG$name-$model.json"
  done
done
for name in squad cmrc2018 hotpotqa; do
  for model in "${ALL_MODELS[@]}"; do
    report="results/qa_model-choice-$TAG$name-$model.json"
    if [ -f "$report" ]; then reports+=("$report"); fi
  done
done
.venv/bin/python -m benchmarks choose-model "${reports[@]}" --json results/model_choice.json

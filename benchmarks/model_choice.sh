#!/usr/bin/env bash
# The embedded default by rule (benchmarks/model_choice.py): each embedded instruct model answers the same development
# questions of SQuAD 2.0, CMRC 2018 and HotpotQA end to end (naive pipeline, compressed evidence, each dataset's
# paragraphs pooled), then `python -m benchmarks choose-model` applies the rule and writes results/model_choice.json;
# config.settings.DEFAULT_LOCAL_MODEL must name its choice (tests/test_model_choice.py). Each run resumes
# from its per-question records. Run it on an idle machine: the rule reads the median seconds per answer.
#   LIMIT=40 bash benchmarks/model_choice.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${DATA:-../shared/data}"
LIMIT="${LIMIT:-40}"
MODELS=(smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
declare -A DATASETS=(
  [squad]="data/squad/squad2_dev_mixed400.json.gz"
  [cmrc2018]="$DATA/cmrc2018/cmrc2018_dev.json.gz"
  [hotpotqa]="$DATA/hotpotqa/hotpot_dev_distractor_sample500_amor.jsonl.gz"
)
export RAG_CACHE_ENABLED=false
reports=()
for name in squad cmrc2018 hotpotqa; do
  for model in "${MODELS[@]}"; do
    echo "== $(date -u +%H:%M:%S) $name $model"
    RAG_LOCAL_MODEL="$model" .venv/bin/rag eval qa --dataset "${DATASETS[$name]}" --pipeline naive --split dev \
      --limit "$LIMIT" --pool all --results "results/runs/model-choice-$name-$model.jsonl" \
      --json "results/qa_model-choice-$name-$model.json"
    reports+=("results/qa_model-choice-$name-$model.json")
  done
done
.venv/bin/python -m benchmarks choose-model "${reports[@]}" --json results/model_choice.json

#!/usr/bin/env bash
# The recorded bilm-small run (README, "Pretraining"): prepare the open-licence corpus, pretrain
# for a bounded time, fine-tune on EWT raw text, evaluate held-out perplexity before and after.
#
#   nohup nice -n 10 scripts/run_bilm_small.sh all > pretrain-small.log 2>&1 &
#
# Stages can be rerun alone: corpus | pretrain | finetune | evaluate | all.
# Peak RSS of each stage is in RUN/<stage>.time (GNU time -v).
set -euo pipefail
# defaults relative to the checkout (corpus/ and training/ are not tracked)
cd "$(dirname "$0")/.."
DATASETS=${DATASETS:-../shared/datasets}
CORPUS=${CORPUS:-corpus/bilm-small}
RUN=${RUN:-training/pretrain-small}
PRETRAIN_TIME=${PRETRAIN_TIME:-50m}
FINETUNE_TIME=${FINETUNE_TIME:-10m}
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE  # a shared 2-core machine: no spinning threads
timed() { local name=$1; shift; /usr/bin/time -v -o "$RUN/$name.time" "$@"; grep -E "Maximum resident|Elapsed" "$RUN/$name.time"; }
mkdir -p "$RUN"

corpus() {
  [ -f "$CORPUS/ATTRIBUTION.md" ] || python scripts/prepare_corpus.py --datasets "$DATASETS" --output "$CORPUS" --wikitext
}

pretrain() {
  timed pretrain python -m spacy_elmo pretrain configs/bilm-small.cfg --output "$RUN" \
    --paths.train "$CORPUS/pretrain/train" --paths.dev "$CORPUS/pretrain/dev.txt" --max-time "$PRETRAIN_TIME" \
    $( [ -d "$RUN/checkpoints" ] && echo --resume )
}

finetune() {
  timed finetune python -m spacy_elmo finetune configs/bilm-small.cfg --model "$RUN/model-best" \
    --output "$RUN/finetune-ewt" --paths.train "$CORPUS/domain/ewt-train.txt" \
    --paths.dev "$CORPUS/domain/ewt-dev.txt" --max-time "$FINETUNE_TIME" --training.eval_frequency 100
}

evaluate() {
  for model in model-best finetune-ewt/model-best; do
    for data in eval/wikitext2-test.txt domain/ewt-dev.txt pretrain/dev.txt; do
      name="eval-$(echo "$model-$data" | tr '/' '_' | sed 's/.txt$//')"
      timed "$name" python -m spacy_elmo evaluate --model "$RUN/$model" --data "$CORPUS/$data" \
        --output "$RUN/$name.json"
    done
  done
}

case "${1:-all}" in
  corpus) corpus ;;
  pretrain) pretrain ;;
  finetune) finetune ;;
  evaluate) evaluate ;;
  all) corpus; pretrain; finetune; evaluate ;;
  *) echo "usage: $0 [corpus|pretrain|finetune|evaluate|all]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The shipped English biLM, rebuilt from open-licence text in resumable stages (see
# spacy_elmo/models/en_small/MODEL_CARD.md for what each stage ran and where).
#
#   lab/campaign/campaign.sh corpus               # build $CORPUS (needs Debian's bible-kjv for `bible`)
#   lab/campaign/campaign.sh pretrain 100m        # one stretch; run again to continue (--resume)
#   lab/campaign/campaign.sh continue 100m        # or: continue the shipped biLM ($START) on $CORPUS, keeping its
#                                            # vocabulary and softmax (a wider corpus: lab/corpus/wide_corpus.py);
#                                            # overrides may follow the time, e.g. --system.threads 1
#   lab/campaign/campaign.sh finetune 3m          # continue on UD EWT train text (longer loses general text)
#   lab/campaign/campaign.sh evaluate             # held-out perplexity of both stages on the test texts
#   lab/campaign/campaign.sh downstream           # UPOS and NER at 1% of train, the fine-tuned biLM against the
#                                            # shipped one ($SHIPPED), seeds $SEEDS (default 0 1 2); the plain
#                                            # runs the gains are over are $PLAIN's (metrics folder or records file)
#   lab/campaign/campaign.sh probes               # the fine-tuned biLM's default mix chosen on WiC train, then its layer
#                                            # probes (UPOS, Senseval-2 1-NN, WiC test), WiC dev and Senseval-2 alone
#   lab/campaign/campaign.sh textcat              # movie-review sentiment at 1% and 10% of train with the fine-tuned biLM
#   FRACTIONS="1 10" lab/campaign/campaign.sh downstream   # downstream at each fraction (default 1)
#   MODELS=continued SHIPPED_RUNS='DIR/downstream-{pct}pct-metrics.json#NAME' ...downstream   # the shipped
#                                            # model's runs taken from an earlier report instead of run again
#   lab/campaign/campaign.sh results DIR          # copy metrics, curves, reports and evaluations into DIR
#
# Checkpoints live in $RUN (untracked; set RUN to keep them outside the checkout). Each stretch ends on its own (--max-time) with
# a checkpoint, model-last/ and model-best/; a stretch that is killed resumes from its last checkpoint.
set -euo pipefail
# defaults relative to the checkout (corpus/ and training/ are not tracked), as lab/project.yml's vars
# (its commands run these stages: python -m spacy project run shipped-model lab)
cd "$(dirname "$0")/../.."
DATASETS=${DATASETS:-assets/datasets}  # vars.datasets (spacy project assets --extra, in the checkout)
CORPUS=${CORPUS:-corpus/full}
RUN=${RUN:-training/campaign}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# the recipe: bilm-small's shape; Adam with warm-up and inverse-sqrt decay; 256 sentences a step
RECIPE=(
  --training.optimizer adam --training.learning_rate 0.002 --training.warmup_steps 200
  --training.lr_schedule inverse_sqrt --training.batch_size 256 --training.max_batch_tokens 6144
  --training.eval_frequency 300 --training.checkpoint_frequency 100 --training.max_epochs 100
)
# the campaign's stages keep the vocabulary, train on their own text alone and spend their time on it:
# no domain words added, no general text replayed or scored, float32 unless --training.autocast says (finetune's
# defaults add, replay, score and take bf16 where the CPU has bf16 arithmetic)
KEEP=(--finetune.add_words 0 --finetune.replay null --finetune.general null --finetune.autocast off)
mkdir -p "$RUN"

case "${1:-}" in
  corpus)
    command -v bible >/dev/null || { echo "needs Debian's bible-kjv package (apt-get install bible-kjv)" >&2; exit 2; }
    bible -l100000 Gen1:1-Rev22:21 > "$RUN/kjv.txt"
    python -m lab.corpus.prepare_corpus --datasets "$DATASETS" --output "$CORPUS" --wikitext --all-open --kjv "$RUN/kjv.txt"
    ;;
  pretrain)
    python -m spacy_elmo pretrain configs/bilm-small.cfg --output "$RUN/pretrain" \
      --paths.train "$CORPUS/pretrain/train" --paths.dev "$CORPUS/pretrain/dev.txt" "${RECIPE[@]}" \
      --max-time "${2:-100m}" $( [ -d "$RUN/pretrain/checkpoints" ] && echo --resume )
    ;;
  continue)
    # the shipped model is the EWT fine-tuned one: its pretraining goes on here (into $RUN/pretrain, so the
    # finetune and evaluate stages follow unchanged); a fresh Adam state warms up over 100 steps to the
    # fine-tuning rate, about twice the rate the inverse-sqrt schedule had reached at 0.6.0's step 10,500
    python -m spacy_elmo finetune configs/bilm-small.cfg --model "${START:-spacy_elmo/models/en_small}" \
      --output "$RUN/pretrain" --paths.train "$CORPUS/pretrain/train" --paths.dev "$CORPUS/pretrain/dev.txt" \
      --training.optimizer adam --training.learning_rate 0.0005 --training.warmup_steps 100 "${KEEP[@]}" \
      --training.batch_size 256 --training.max_batch_tokens 6144 --training.eval_frequency 300 \
      --training.checkpoint_frequency 100 --training.max_epochs 100 --probe.enabled true \
      --max-time "${2:-100m}" $( [ -d "$RUN/pretrain/checkpoints" ] && echo --resume ) "${@:3}"
    ;;
  finetune)
    python -m spacy_elmo finetune configs/bilm-small.cfg --model "$RUN/pretrain/model-best" \
      --output "$RUN/finetune-ewt" --paths.train "$CORPUS/domain/ewt-train.txt" \
      --paths.dev "$CORPUS/domain/ewt-dev.txt" --max-time "${2:-3m}" \
      --training.optimizer adam --training.learning_rate 0.0005 --training.eval_frequency 100 "${KEEP[@]}" \
      --training.batch_size 256 --training.max_batch_tokens 6144 \
      $( [ -d "$RUN/finetune-ewt/checkpoints" ] && echo --resume )
    ;;
  evaluate)
    for model in pretrain/model-best finetune-ewt/model-best; do
      # EWT dev chose the fine-tuned model-best; EWT test and WikiText-2 test are held out from every stage
      for data in eval/ewt-test.txt domain/ewt-dev.txt eval/wikitext2-test.txt pretrain/dev.txt; do
        name="eval-$(echo "$model-$data" | tr '/' '_' | sed 's/.txt$//')"
        python -m spacy_elmo evaluate --model "$RUN/$model" --input "$CORPUS/$data" --output "$RUN/$name.json"
      done
    done
    ;;
  downstream)
    seeds=${SEEDS:-0 1 2}
    for fraction in ${FRACTIONS:-1}; do
      # the folders of 1% keep their earlier names (continued-s0); other fractions carry theirs (continued10-s0)
      tag=$( [ "$fraction" = 1 ] || echo "$fraction" )
      for seed in $seeds; do
        for model in ${MODELS:-shipped continued}; do
          elmo=$( [ "$model" = shipped ] && echo "${SHIPPED:-spacy_elmo/models/en_small}" || echo "$RUN/finetune-ewt/model-best" )
          python -m lab.campaign.run_experiment --corpus "${DOWNSTREAM:-corpus/downstream-full}" --elmo "$elmo" \
            --output "$RUN/downstream/$model$tag-s$seed" --elmo-cache-mb 2048 --tasks upos ner --fractions "$fraction" \
            --settings elmo --training.max_steps 2000 --training.eval_frequency 200 --system.seed "$seed"
        done
      done
      folders() { for seed in $seeds; do printf '%s,' "$RUN/downstream/$1$tag-s$seed/metrics"; done | sed 's/,$//'; }
      # SHIPPED_RUNS (with MODELS=continued): the shipped model's runs kept by an earlier report, on the same
      # data and seeds, as FILE#NAME with {pct} for the fraction; PLAIN may carry {pct} too
      shipped=$( [ -n "${SHIPPED_RUNS:-}" ] && echo "${SHIPPED_RUNS//\{pct\}/$fraction}" || folders shipped )
      plain=${PLAIN:-results/en_small/0.6.0/full-metrics.json}
      python -m lab.campaign.report_results --seeds "shipped=$shipped" "continued=$(folders continued)" \
        --plain "${plain//\{pct\}/$fraction}" --table "$RUN/downstream-${fraction}pct.md" \
        --plot "$RUN/downstream-${fraction}pct.png" --records "$RUN/downstream-${fraction}pct-metrics.json" \
        --title "UPOS and NER at ${fraction}% of train, seeds $seeds"
    done
    ;;
  probes)
    model="$RUN/finetune-ewt/model-best"
    # the default mix first (written into the model's vectors.json): the probes' "default mix" rows read it
    python -m lab.release.sense_vectors --model "$model" --wic "$DATASETS/wic" --output "$RUN/sense-vectors.json" --write
    python -m spacy_elmo probe --model "$model" --data-dir "$DATASETS" --output "$RUN/probe"
    python -m spacy_elmo probe --model "$model" --data-dir "$DATASETS" --task wic \
      --eval "$DATASETS/wic/dev/dev.data.txt" --output "$RUN/probe-wic-dev"
    python -m spacy_elmo probe --model "$model" --data-dir "$DATASETS" --task wsd --output "$RUN/senseval2"
    ;;
  textcat)
    python -m lab.campaign.run_experiment --corpus "${DOWNSTREAM:-corpus/downstream-full}" --tasks textcat \
      --fractions 1 10 --settings elmo --elmo "$RUN/finetune-ewt/model-best" --output "$RUN/textcat" \
      --elmo-cache-mb 2048 --training.max_steps 2000 --training.eval_frequency 200
    python -m lab.campaign.report_results "$RUN/textcat/metrics" --table "$RUN/textcat.md" --plot "$RUN/textcat.png" \
      --records "$RUN/textcat-metrics.json" --title "Movie-review sentiment (polarity v2.0), 1% and 10% of train"
    ;;
  results)
    out=${2:?results DIR}
    mkdir -p "$out/pretrain" "$out/finetune-ewt"
    for stage in pretrain finetune-ewt; do
      for f in metrics.jsonl learning-curve.png corpus-stats.json finetune-report.json; do
        [ -f "$RUN/$stage/$f" ] && cp "$RUN/$stage/$f" "$out/$stage/"
      done
      [ -f "$RUN/$stage/model-best/config.json" ] && cp "$RUN/$stage/model-best/config.json" "$out/$stage/model-best-config.json"
    done
    cp "$RUN"/eval-*.json "$out/" 2>/dev/null || true
    for f in downstream-{1,10}pct.md downstream-{1,10}pct.png downstream-{1,10}pct-metrics.json curve.png curve.json \
             sense-vectors.json textcat.md textcat.png textcat-metrics.json; do
      [ -f "$RUN/$f" ] && cp "$RUN/$f" "$out/"
    done
    cp "$CORPUS/ATTRIBUTION.md" "$out/corpus-ATTRIBUTION.md"
    [ -f "$CORPUS/mix-stats.json" ] && cp "$CORPUS/mix-stats.json" "$out/corpus-mix-stats.json"
    for d in probe probe-wic-dev senseval2 neighbors; do
      if [ -d "$RUN/$d" ]; then mkdir -p "$out/$d"; cp "$RUN/$d"/*.json "$RUN/$d"/*.md "$RUN/$d"/*.png "$out/$d/" 2>/dev/null || true; fi
    done
    true
    ;;
  *) echo "usage: $0 corpus | pretrain [TIME] | continue [TIME] | finetune [TIME] | evaluate | downstream | results DIR" >&2; exit 2 ;;
esac

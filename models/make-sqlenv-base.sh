#!/usr/bin/env bash
# Trains a base model meant to COPY names and values from its context instead of memorising them:
# full-parameter SFT from random weights on oracle episodes of freshly generated databases whose
# names and places come from synthetic pools (a new pool per seed). The tokenizer is sqlenv-tiny's
# kind (merges across words, --split-words false): at equal compute it learnt faster than the
# word-isolating one (models/README.md has the comparison). Everything is made by this project's commands from its
# own generator; nothing is downloaded. The dev split of the standard built-in dataset is never
# trained on: it is the held-out loss (--eval-data) and what `sqlenv eval` measures.
#
#   bash models/make-sqlenv-base.sh [WORK_DIR]        (default: runs/sqlenv-base; the model ends in WORK_DIR/sft2)
#
# Rerunning it continues where it stopped: finished steps are skipped, and the SFT resumes from
# WORK_DIR/sft/checkpoint/ (written every 50 steps, with a loadable model in checkpoint/model).
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-runs/sqlenv-base}"
mkdir -p "$work/data"
sqlenv() { node apps/cli/bin/sqlenv.js "$@"; }
seeds=$(seq 1 31)                       # the SFT pool: one fresh-values dataset per seed
tokenizer_seeds="900001 900002"         # two more, only to learn the tokenizer's merges

# 1. A byte-level model with a long context renders the oracle's episodes (its weights are not used).
byte='{"architecture":"qwen3","vocabSize":272,"hiddenSize":64,"numLayers":2,"numHeads":4,"numKvHeads":2,"headDim":16,"intermediateSize":128,"ropeTheta":10000,"rmsNormEps":1e-6,"maxPositionEmbeddings":16384,"eosTokenIds":[258,256],"padTokenId":256,"qkNorm":true,"tieWordEmbeddings":true}'
[ -f "$work/byte/config.json" ] || sqlenv model init --config "$byte" --out "$work/byte"

# 2. The SFT pool: for every seed a built-in dataset with fresh values and 2 extra draws of every
#    template instance (~720 train questions), and its oracle episodes as chat messages (~22,000 in all).
for s in $seeds; do
  [ -s "$work/data/pool-$s.messages.jsonl" ] && continue
  rm -rf "$work/data/ds-$s"
  sqlenv datasets builtin --out "$work/data/ds-$s" --seed "$s" --fresh-values --extra-train-per-instance 2
  sqlenv sft-data --model "$work/byte" --dataset "$work/data/ds-$s" --split train --episodes all --context-tokens 16384 --format messages --out "$work/data/pool-$s.tmp"
  mv "$work/data/pool-$s.tmp" "$work/data/pool-$s.messages.jsonl"
  rm -rf "$work/data/ds-$s"
done
[ -s "$work/pool.messages.jsonl" ] || for s in $seeds; do cat "$work/data/pool-$s.messages.jsonl"; done > "$work/pool.messages.jsonl"

# 3. Held-out episodes: the standard dev split (60 questions), for the dev loss curve.
[ -s "$work/dev.messages.jsonl" ] || sqlenv sft-data --model "$work/byte" --split dev --episodes all --context-tokens 16384 --format messages --out "$work/dev.messages.jsonl"

# 4. A 2,048-token byte-level BPE (--split-words false: merges may cross words), learnt on two
#    fresh-values datasets and the standard train split (736 episodes).
if [ ! -f "$work/tokenizer/tokenizer.json" ]; then
  for s in $tokenizer_seeds; do
    sqlenv datasets builtin --out "$work/tok-$s" --seed "$s" --fresh-values
    sqlenv sft-data --model "$work/byte" --dataset "$work/tok-$s" --split train --episodes all --context-tokens 16384 --format ids --out "$work/tok-$s.ids.jsonl"
  done
  sqlenv sft-data --model "$work/byte" --split train --episodes all --context-tokens 16384 --format ids --out "$work/tok-std.ids.jsonl"
  cat "$work"/tok-900001.ids.jsonl "$work"/tok-900002.ids.jsonl "$work"/tok-std.ids.jsonl > "$work/tok.ids.jsonl"
  sqlenv model tokenizer --data "$work/tok.ids.jsonl" --model "$work/byte" --vocab-size 2048 --split-words false --out "$work/tokenizer"
fi

# 5. Random initial weights, seed 0: the shipped model's shape (hidden 192, 4 layers, 6 query / 2
#    KV heads, 2.1 M parameters) with a 4,096-token context.
model='{"architecture":"qwen3","vocabSize":2048,"hiddenSize":192,"numLayers":4,"numHeads":6,"numKvHeads":2,"headDim":32,"intermediateSize":576,"ropeTheta":10000,"rmsNormEps":1e-6,"maxPositionEmbeddings":4096,"eosTokenIds":[258,256],"padTokenId":256,"qkNorm":true,"tieWordEmbeddings":true}'
[ -f "$work/init/model.safetensors" ] || sqlenv model init --config "$model" --tokenizer "$work/tokenizer" --seed 0 --out "$work/init"

# 6. Full-parameter SFT: 3,000 steps of 16 episodes (~2.2 passes over the pool), AdamW, peak LR
#    3e-3, 100 warm-up steps, cosine to 5 %, a new shuffle every pass, seed 1; dev loss every 200
#    steps; a checkpoint every 50 steps; resumed when one is there; one intra-op thread (the
#    figures in models/README.md are from that setting; other thread counts may round differently).
#    sft_stage OUT FROM STEPS LR WARMUP SEED EVAL_EVERY
sft_stage() {
  local resume=()
  [ -f "$work/$1/checkpoint/sft-state.safetensors" ] && resume=(--resume)
  sqlenv sft --model "$2" --data "$work/pool.messages.jsonl" --eval-data "$work/dev.messages.jsonl" --eval-every "$7" \
    --full --steps "$3" --batch-size 16 --lr "$4" --schedule cosine --warmup-steps "$5" --min-lr-ratio 0.05 --shuffle --seed "$6" \
    --checkpoint-every 50 --threads 1 --out "$work/$1" "${resume[@]}" >> "$work/$1.jsonl"
  tail -n 1 "$work/$1.jsonl"
}
sft_stage sft "$work/init" 3000 3e-3 100 1 200

# 7. A second pass from the result (a warm restart of the schedule): 1,500 more steps on the same pool,
#    peak LR 1e-3, 50 warm-up steps, cosine to 5 %, seed 2; dev loss every 250 steps. The shipped model
#    is "$work/sft2" (models/README.md: what it added on the dev split and the copy test).
sft_stage sft2 "$work/sft" 1500 1e-3 50 2 250

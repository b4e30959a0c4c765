#!/usr/bin/env bash
# Rebuilds models/sqlenv-tiny: the checkpoint `npm start` (sqlenv learn) starts from, made by this
# project's own commands from this project's built-in dataset (no download). Deterministic: the same
# commands and seeds write the same files (about 40 minutes of one CPU core).
#
#   bash models/make-sqlenv-tiny.sh [OUT_DIR]        (default: models/sqlenv-tiny)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-models/sqlenv-tiny}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sqlenv() { node apps/cli/bin/sqlenv.js "$@"; }

# 1. The training data: the built-in dataset with 20 extra draws of every template instance in its
#    train split (2,911 train questions; the 60 dev questions are the same as the default dataset's
#    and are never trained on).
sqlenv datasets builtin --out "$work/data" --extra-train-per-instance 20

# 2. The oracle's episodes in the agent's own prompt and tool-call format. A byte-level model with a
#    long context renders them (its weights are not used), once as token ids for the tokenizer, once
#    as chat messages for SFT.
byte='{"architecture":"qwen3","vocabSize":272,"hiddenSize":64,"numLayers":2,"numHeads":4,"numKvHeads":2,"headDim":16,"intermediateSize":128,"ropeTheta":10000,"rmsNormEps":1e-6,"maxPositionEmbeddings":16384,"eosTokenIds":[258,256],"padTokenId":256,"qkNorm":true,"tieWordEmbeddings":true}'
sqlenv model init --config "$byte" --out "$work/byte"
sqlenv sft-data --model "$work/byte" --dataset "$work/data" --split train --episodes all --context-tokens 16384 --format ids --out "$work/train.ids.jsonl"
sqlenv sft-data --model "$work/byte" --dataset "$work/data" --split train --episodes all --context-tokens 16384 --format messages --out "$work/train.messages.jsonl"

# 3. A 2,048-token byte-level BPE tokenizer learnt on those episodes (merges across spaces: ~300
#    tokens an episode instead of ~2,500 bytes).
sqlenv model tokenizer --data "$work/train.ids.jsonl" --model "$work/byte" --vocab-size 2048 --split-words false --out "$work/tokenizer"

# 4. A 2.1 M-parameter Qwen3-architecture decoder (hidden 192, 4 layers, 6 query / 2 KV heads,
#    tied embeddings) with random weights, seed 0.
model='{"architecture":"qwen3","vocabSize":2048,"hiddenSize":192,"numLayers":4,"numHeads":6,"numKvHeads":2,"headDim":32,"intermediateSize":576,"ropeTheta":10000,"rmsNormEps":1e-6,"maxPositionEmbeddings":2048,"eosTokenIds":[258,256],"padTokenId":256,"qkNorm":true,"tieWordEmbeddings":true}'
sqlenv model init --config "$model" --tokenizer "$work/tokenizer" --seed 0 --out "$work/init"

# 5. Full-parameter SFT on the assistant tokens: 1,500 steps of 16 episodes (~8 epochs), AdamW,
#    peak LR 3e-3, 50 warm-up steps, cosine to 5 %, a new shuffle every epoch, seed 1.
sqlenv sft --model "$work/init" --data "$work/train.messages.jsonl" --full --steps 1500 --batch-size 16 \
  --lr 3e-3 --schedule cosine --warmup-steps 50 --min-lr-ratio 0.05 --shuffle --seed 1 --out "$out" > "$work/sft.jsonl"
tail -n 1 "$work/sft.jsonl"

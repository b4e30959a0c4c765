#!/usr/bin/env bash
# One GRPO run of the learning recipe's settings (EPISODES, default 4096) played through, and the
# same command stopped by SIGINT after its STOP_AT-th version (default 40) and continued with --resume. Writes both run
# directories and their JSON summaries under $OUT (default: a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
args=(train --policy model --model models/sqlenv-base --dataset builtin-heldout --episodes "${EPISODES:-4096}" --group-size 8 --groups-per-batch 4
  --max-staleness 1 --temperature 1 --lr 5e-4 --lora-rank 16 --lora-alpha 32 --max-new-tokens 96 --concurrency 32
  --eval-episodes all --eval-seeds 2 --eval-temperature 1 --eval-seed 1000000 --seed 0 --json --progress off)
node apps/cli/bin/sqlenv.js "${args[@]}" --run-dir "$OUT/through" > "$OUT/through.json"
node apps/cli/bin/sqlenv.js "${args[@]}" --run-dir "$OUT/stopped" > "$OUT/stopped-part.json" &
pid=$!
until [ -f "$OUT/stopped/metrics.jsonl" ] && [ "$(wc -l < "$OUT/stopped/metrics.jsonl")" -ge "${STOP_AT:-40}" ]; do sleep 0.5; done
kill -INT "$pid"
wait "$pid" || echo "stopped part exited $?"
node apps/cli/bin/sqlenv.js train --run-dir "$OUT/stopped" --resume --json --progress off > "$OUT/resumed.json"
echo "$OUT"

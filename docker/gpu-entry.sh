#!/usr/bin/env bash
# Entry point of the GPU image: claim ONE GPU of this host for this container, then run the command
# with CUDA_VISIBLE_DEVICES set to it.
#
# Why this exists: docker-compose.yml reserves GPUs with `deploy.resources.reservations.devices`.
# With `count: N` the engine exposes the FIRST N devices (it sets NVIDIA_VISIBLE_DEVICES=0,…,N-1;
# moby daemon/nvidia_linux.go, countToDevices), and every replica of a scaled service gets the same
# request, so `count: 1` gives every worker GPU 0. Compose tells a container nothing about its
# replica number, so the GPU services reserve all devices (`count: all`) and each container claims
# one here: an exclusive flock(1) on <lock dir>/gpu-<i>.lock, held by the command itself (the lock
# fd is inherited through exec) and released by the kernel when the process exits, however it exits.
# The lock directory is a volume shared by the containers of one host (a local named volume is
# per-host, which is exactly the scope of GPU indices). docs/operations.md has the whole recipe.
#
# Settings (environment):
#   SQLENV_EXECUTION_PROVIDER  cuda (claim a GPU) | cpu | webgpu (run the command as it is). Default cuda.
#   SQLENV_GPUS                GPUs this container may claim: "all" or a list like "0,2-3". Default all.
#   SQLENV_GPUS_EXCLUDE        GPUs never claimed here (the trainers' ones, for workers). Default none.
#   SQLENV_GPU_COUNT           GPUs on the host; detected with nvidia-smi (or /proc/driver/nvidia) when unset.
#   SQLENV_GPU_LOCK_DIR        Where the per-GPU lock files live. Default /run/sqlenv-gpus.
#   SQLENV_GPU_WAIT_S          How long to wait for a GPU to free up (a replaced container still holding
#                              one) before giving up with exit code 75. Default 120.
set -euo pipefail

log() {
  # One JSON line on stderr, like the apps' pino logs.
  printf '{"level":%s,"time":%s,"component":"gpu-entry","msg":"%s"%s}\n' "$1" "$(date +%s%3N)" "$2" "${3:-}" >&2
}

# "all" | "0,2-3" -> one index per line, within 0..count-1.
expand_list() {
  local spec="$1" count="$2" part from to i
  if [[ "$spec" == "all" ]]; then
    for ((i = 0; i < count; i++)); do echo "$i"; done
    return
  fi
  IFS=',' read -ra parts <<<"$spec"
  for part in "${parts[@]}"; do
    part="${part// /}"
    [[ -z "$part" ]] && continue
    if [[ "$part" =~ ^([0-9]+)-([0-9]+)$ ]]; then
      from="${BASH_REMATCH[1]}" to="${BASH_REMATCH[2]}"
    elif [[ "$part" =~ ^[0-9]+$ ]]; then
      from="$part" to="$part"
    else
      continue # validate_list has refused it already
    fi
    for ((i = from; i <= to && i < count; i++)); do echo "$i"; done
  done
}

# Refuse a malformed list in the main shell (expand_list runs in a subshell, where exit would not stop us).
validate_list() {
  local name="$1" spec="$2"
  if [[ -n "$spec" && "$spec" != "all" && ! "$spec" =~ ^[[:space:]]*[0-9]+(-[0-9]+)?([[:space:]]*,[[:space:]]*[0-9]+(-[0-9]+)?)*[[:space:]]*$ ]]; then
    log 60 "bad GPU list in $name" ",\"value\":\"$spec\",\"expected\":\"all, or indices and ranges like 0,2-3\""
    exit 64
  fi
}

detect_gpu_count() {
  if [[ -n "${SQLENV_GPU_COUNT:-}" ]]; then
    echo "$SQLENV_GPU_COUNT"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
  elif [[ -d /proc/driver/nvidia/gpus ]]; then
    find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 | wc -l
  else
    echo 0
  fi
}

provider="${SQLENV_EXECUTION_PROVIDER:-cuda}"
if [[ "$provider" != "cuda" ]]; then
  log 30 "no GPU claimed" ",\"executionProvider\":\"$provider\""
  exec "$@"
fi

count="$(detect_gpu_count)"
if ! [[ "$count" =~ ^[0-9]+$ ]] || ((count == 0)); then
  log 60 "CUDA was asked for (SQLENV_EXECUTION_PROVIDER=cuda) but this container sees no GPU: install the NVIDIA driver and container toolkit on the host, or use docker-compose.cpu.yml" ",\"gpuCount\":\"$count\""
  exit 69
fi

validate_list SQLENV_GPUS "${SQLENV_GPUS:-all}"
validate_list SQLENV_GPUS_EXCLUDE "${SQLENV_GPUS_EXCLUDE:-}"
mapfile -t excluded < <(expand_list "${SQLENV_GPUS_EXCLUDE:-}" "$count")
candidates=()
while read -r i; do
  skip=0
  for e in "${excluded[@]}"; do [[ "$e" == "$i" ]] && skip=1; done
  ((skip == 0)) && candidates+=("$i")
done < <(expand_list "${SQLENV_GPUS:-all}" "$count")
if ((${#candidates[@]} == 0)); then
  log 60 "no GPU left to claim: SQLENV_GPUS minus SQLENV_GPUS_EXCLUDE is empty" ",\"gpus\":\"${SQLENV_GPUS:-all}\",\"exclude\":\"${SQLENV_GPUS_EXCLUDE:-}\",\"gpuCount\":$count"
  exit 64
fi

lock_dir="${SQLENV_GPU_LOCK_DIR:-/run/sqlenv-gpus}"
mkdir -p "$lock_dir"
wait_s="${SQLENV_GPU_WAIT_S:-120}"
deadline=$((SECONDS + wait_s))
logged_wait=0
while :; do
  for i in "${candidates[@]}"; do
    exec {lock_fd}>>"$lock_dir/gpu-$i.lock"
    if flock -n "$lock_fd"; then
      # Who holds it, for an operator looking at the lock directory.
      printf '%s %s\n' "$(hostname)" "$$" >"$lock_dir/gpu-$i.owner"
      export CUDA_VISIBLE_DEVICES="$i"
      # CUDA numbers devices fastest-first unless told otherwise; nvidia-smi (and our index) is PCI order.
      export CUDA_DEVICE_ORDER=PCI_BUS_ID
      log 30 "GPU claimed" ",\"gpu\":$i,\"gpuCount\":$count,\"candidates\":\"${candidates[*]}\""
      exec "$@"
    fi
    exec {lock_fd}>&-
  done
  if ((SECONDS >= deadline)); then
    log 60 "every GPU this container may use is claimed by another container on this host; scale to at most one worker per GPU" ",\"candidates\":\"${candidates[*]}\",\"waitedS\":$wait_s"
    exit 75
  fi
  if ((logged_wait == 0)); then
    log 40 "waiting for a GPU to free up" ",\"candidates\":\"${candidates[*]}\""
    logged_wait=1
  fi
  sleep 1
done

#!/usr/bin/env bash
# The H100 paired comparison, as run on a lent GPU machine from
# the repository root, with the binaries of a build made elsewhere:
#
#   BIN=build-gpu/bin OUT=out BUDGET=470 bash tools/gpu_compare_run.sh
#
# First the CUDA tests and a small compare (the run stops there if either
# fails), then for each setting (devices / max dim) compares of 8 tasks each,
# seeds 0, 1, 2, ..., until the setting's share of BUDGET seconds is spent: a
# run cut short loses at most its own 8 tasks. Each compare writes
# gpu_<devices>_<maxdim>_s<seed>.json (and .txt), packed after every run into
# $OUT/results.tgz (a lent machine returns few files); tools/pool_compare.py
# pools a setting's files into one paired table with its interval.
set -u
BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-out}
BUDGET=${BUDGET:-470}
PLANNERS=${PLANNERS:-torchrec_like,neuroshard,neuroshard_ls,lookup_greedy,dreamshard,autoshard}
COUNT=${COUNT:-8}
RES=$(mktemp -d)
mkdir -p "$OUT"
pack() { tar czf "$OUT/results.tgz" -C "$RES" . ; }
start=$SECONDS
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)"
} > "$OUT/machine.txt" 2>&1
timeout 120 "$BIN/test_kernel_cuda" > "$RES/test_kernel_cuda.txt" 2>&1
echo "test_kernel_cuda rc=$? ($((SECONDS - start)) s)" | tee -a "$OUT/machine.txt"
tail -4 "$RES/test_kernel_cuda.txt"
common=(--model data/cost/gpu_compute_model.safetensors
        --policy data/rl/dreamshard_cpu_4dev.safetensors
        --autoshard-policy data/rl/autoshard_cpu_8dev.safetensors --quiet)
timeout 60 "$BIN/embplan_gpu" compare --devices 4 --max-dim 16 --count 2 \
  --planners torchrec_like,lookup_greedy --rounds 2 "${common[@]}" > "$RES/smoke.txt" 2>&1
rc=$?
echo "smoke compare rc=$rc ($((SECONDS - start)) s)" | tee -a "$OUT/machine.txt"
pack
[ "$rc" -eq 0 ] || { cat "$RES/smoke.txt"; exit 1; }
# Shares of what is left: 4/32 first (the setting earlier runs measured on the CPU).
settings=("4 32 30" "4 128 25" "8 32 25" "8 128 20")
left=$((BUDGET - (SECONDS - start)))
for s in "${settings[@]}"; do
  read -r d m share <<< "$s"
  until_t=$((SECONDS + left * share / 100))
  seed=0
  while [ $((SECONDS)) -lt "$until_t" ]; do
    t0=$SECONDS
    timeout $((until_t - SECONDS + 10)) "$BIN/embplan_gpu" compare --devices "$d" --max-dim "$m" \
      --count "$COUNT" --seed "$seed" --planners "$PLANNERS" "${common[@]}" \
      --json "$RES/gpu_${d}_${m}_s${seed}.json" > "$RES/gpu_${d}_${m}_s${seed}.txt" 2>&1
    echo "devices $d max dim $m seed $seed rc=$? $((SECONDS - t0)) s" | tee -a "$OUT/machine.txt"
    pack
    seed=$((seed + 1))
  done
done
echo "total $((SECONDS - start)) s" | tee -a "$OUT/machine.txt"

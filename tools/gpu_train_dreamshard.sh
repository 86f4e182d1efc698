#!/usr/bin/env bash
# DreamShard trained on the GPU meter (issue 20), as run on a lent GPU machine
# from the repository root, with binaries built elsewhere (embplan and
# embplan_gpu, e.g. cmake -DCMAKE_CUDA_ARCHITECTURES=90, carried):
#
#   BIN=build-gpu/bin OUT=out BUDGET=470 bash tools/gpu_train_dreamshard.sh
#
# Makes the DLRM-T (D) train and test tasks (DreamShard §4.1: dim 16, 50 tasks
# per half of the pool, devices of 16 GiB), trains a policy with
# `embplan_gpu train dreamshard --meter cuda` (Algorithm 1, the paper's
# defaults, a checkpoint after every iteration: a run cut short by the budget
# resumes where it stopped when the script runs again with the same OUT), then
# compares it on COUNT test tasks against the baselines on the GPU meter. Every
# file lands in $OUT/results.tgz (a lent machine returns few files).
#   T=20 D=4 SEED=0 COUNT=20 METER=cuda are the defaults.
set -u
BIN=${BIN:-build-gpu/bin}
OUT=${OUT:-out}
BUDGET=${BUDGET:-470}
T=${T:-20}
D=${D:-4}
SEED=${SEED:-0}
COUNT=${COUNT:-20}
METER=${METER:-cuda}  # analytic: a smoke run of the script where there is no GPU
RES="$OUT/res"
mkdir -p "$RES"
pack() { tar czf "$OUT/results.tgz" -C "$RES" . ; }
start=$SECONDS
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)"
} > "$RES/machine.txt" 2>&1
tasks=(--protocol dreamshard --devices "$D" --tables "$T" --split-seed 0 --seed 0 --memory-gib 16)
"$BIN/embplan" tasks "${tasks[@]}" --count 50 --half train --out "$RES/train.json" > /dev/null || exit 1
name="dreamshard_${METER}_${D}dev_${T}t_s${SEED}"
resume=()
[ -f "$RES/$name.ckpt" ] && resume=(--resume "$RES/$name.ckpt")
left=$((BUDGET - (SECONDS - start)))
timeout $((left * 2 / 3)) "$BIN/embplan_gpu" train dreamshard --tasks "$RES/train.json" \
  --meter "$METER" --seed "$SEED" --quiet --checkpoint "$RES/$name.ckpt" "${resume[@]}" \
  --trained-on "embplan tasks ${tasks[*]} --count 50 --half train: DLRM-$T ($D)" \
  --out "$RES/$name.safetensors" > "$RES/$name.train.txt" 2>&1
rc=$?
echo "train rc=$rc ($((SECONDS - start)) s)" | tee -a "$RES/machine.txt"
pack
[ "$rc" -eq 0 ] || { tail -5 "$RES/$name.train.txt"; exit 1; }
left=$((BUDGET - (SECONDS - start)))
timeout "$left" "$BIN/embplan_gpu" compare "${tasks[@]}" --max-dim 16 --count "$COUNT" \
  --half test --meter "$METER" --model data/cost/gpu_compute_model.safetensors --policy "$RES/$name.safetensors" \
  --planners random,lookup_greedy,torchrec,neuroshard_ls,dreamshard --quiet \
  --json "$RES/$name.compare.json" > "$RES/$name.compare.txt" 2>&1
echo "compare rc=$? ($((SECONDS - start)) s)" | tee -a "$RES/machine.txt"
pack

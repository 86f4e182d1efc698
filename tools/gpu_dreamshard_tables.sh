#!/usr/bin/env bash
# DreamShard trained and judged on the GPU meter (DreamShard §4,
# Tables 1 and 2), as run on a lent GPU machine from the repository root, in
# one call, with binaries and training tasks made elsewhere and carried:
#
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-gpu -j2 --target embplan_gpu test_kernel_cuda embplan_cli
#   mkdir -p build-gpu/tasks && for t in 20 100; do build-gpu/bin/embplan tasks \
#     --protocol dreamshard --devices 4 --tables $t --split-seed 0 --seed 0 --memory-gib 16 \
#     --count 50 --half train --out build-gpu/tasks/train_${t}_4.json; done
#   # on the GPU machine (carry build-gpu/bin and build-gpu/tasks):
#   BIN=build-gpu/bin TASKS=build-gpu/tasks OUT=out BUDGET=520 bash tools/gpu_dreamshard_tables.sh
#
# (`embplan` links MPI, which the GPU machine lacks: the tasks are made here.)
# In order, each step cut to what is left of BUDGET seconds and every result
# packed into $OUT/results.tgz after it (a lent machine returns few files):
#   1. the CUDA tests;
#   2. a policy trained on DLRM-20 (4) with the GPU meter (Algorithm 1, the
#      paper's defaults, seed 0);
#   3. every planner on 20 DLRM-20 (4) test tasks, on the GPU meter;
#   4. the DLRM-20 (4) policy on 10 DLRM-100 (4) test tasks (Table 2);
#   5. a policy trained on DLRM-100 (4), on the same 10 tasks against torchrec_like;
#   6. the DLRM-20 (4) policy on 10 test tasks of DLRM-40, -60, -80 (4) and
#      DLRM-40 (8), as far as the budget goes.
# METER=analytic runs the same steps without a GPU (a smoke run of the script).
set -u
BIN=${BIN:-build-gpu/bin}
TASKS=${TASKS:-build-gpu/tasks}
OUT=${OUT:-out}
BUDGET=${BUDGET:-520}
METER=${METER:-cuda}
RES=$(mktemp -d)
mkdir -p "$OUT"
start=$SECONDS
left() { echo $((BUDGET - (SECONDS - start))); }
pack() { tar czf "$OUT/results.tgz" -C "$RES" . ; }
log() { echo "$*" | tee -a "$RES/log.txt"; }
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-400
} > "$RES/machine.txt" 2>&1
if [ "$METER" = cuda ]; then
  timeout 90 "$BIN/test_kernel_cuda" > "$RES/test_kernel_cuda.txt" 2>&1
  log "test_kernel_cuda rc=$? at $((SECONDS - start)) s"
  tail -3 "$RES/test_kernel_cuda.txt"
fi
pack

# train T D CAP: a policy on train_T_D.json; at most CAP seconds (or what is left).
train() {
  local t=$1 d=$2 cap=$3 name="dreamshard_${METER}_$1t_$2d" t0=$SECONDS
  local lim=$(( cap < $(left) ? cap : $(left) ))
  [ "$lim" -gt 10 ] || { log "skip train $name: budget spent"; return 1; }
  timeout "$lim" "$BIN/embplan_gpu" train dreamshard --tasks "$TASKS/train_${t}_${d}.json" \
    --meter "$METER" --seed 0 --quiet --checkpoint "$RES/$name.ckpt" \
    --trained-on "embplan tasks --protocol dreamshard --devices $d --tables $t --split-seed 0 --seed 0 --memory-gib 16 --count 50 --half train: DLRM-$t ($d), dim 16, 50 tasks" \
    --out "$RES/$name.safetensors" > "$RES/$name.train.txt" 2>&1
  local rc=$?
  log "train $name rc=$rc $((SECONDS - t0)) s (at $((SECONDS - start)) s)"
  pack
  return $rc
}

# compare T D COUNT PLANNERS POLICY TAG CAP: test-half tasks on the meter.
compare() {
  local t=$1 d=$2 n=$3 planners=$4 policy=$5 tag=$6 cap=$7 t0=$SECONDS
  local lim=$(( cap < $(left) ? cap : $(left) ))
  [ "$lim" -gt 10 ] || { log "skip compare $tag: budget spent"; return 1; }
  timeout "$lim" "$BIN/embplan_gpu" compare --protocol dreamshard --devices "$d" --tables "$t" \
    --max-dim 16 --count "$n" --split-seed 0 --seed 0 --memory-gib 16 --half test \
    --meter "$METER" --model data/cost/gpu_compute_model.safetensors --policy "$policy" \
    --planners "$planners" --quiet --json "$RES/$tag.json" > "$RES/$tag.txt" 2>&1
  local rc=$?
  log "compare $tag rc=$rc $((SECONDS - t0)) s (at $((SECONDS - start)) s)"
  pack
  return $rc
}

all=random,size_greedy,dim_greedy,lookup_greedy,size_lookup_greedy,torchrec_like,neuroshard,neuroshard_ls,dreamshard
few=random,lookup_greedy,size_lookup_greedy,torchrec_like,neuroshard_ls,dreamshard
p20="$RES/dreamshard_${METER}_20t_4d.safetensors"
p100="$RES/dreamshard_${METER}_100t_4d.safetensors"
train 20 4 200 || exit 1
compare 20 4 20 "$all" "$p20" "${METER}_20t_4d" 120
compare 100 4 10 "$few" "$p20" "${METER}_100t_4d_from20" 90
train 100 4 120 && compare 100 4 10 torchrec_like,dreamshard "$p100" "${METER}_100t_4d_on_target" 60
for s in "40 4" "60 4" "80 4" "40 8"; do
  read -r t d <<< "$s"
  compare "$t" "$d" 10 "$few" "$p20" "${METER}_${t}t_${d}d_from20" 60
done
log "total $((SECONDS - start)) s"

#!/bin/bash
# Regenerates every golden file under test/torchrec/golden/ (see tools/torchrec/README.md).
# Usage: tools/torchrec/make_all.sh [GROUP...]   groups: neuroshard_4 neuroshard_8 big_500x8 options
#   (default: those four), big_500x8_full (optional, slow)
# Env: EMBPLAN (embplan CLI binary, default build/bin/embplan), TORCHREC_GIT (TorchRec mirror),
#      PYTHON (a Python with torch, default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
EMBPLAN=${EMBPLAN:-build/bin/embplan}
PYTHON=${PYTHON:-/usr/bin/python3}
GIT=${TORCHREC_GIT:-/work/.mirror/pytorch+torchrec/repo}
OUT=test/torchrec/golden
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"

# tasks NAME ARGS...: write $TMP/NAME.json with `embplan tasks ARGS`; sets SRC to the command.
tasks() {
  local name=$1
  shift
  SRC="embplan tasks $* --out $name.json"
  "$EMBPLAN" tasks "$@" --out "$TMP/$name.json" >/dev/null
}
# golden FILE [--append] ARGS...: run make_golden.py on the last tasks file.
golden() {
  local file=$1
  shift
  "$PYTHON" tools/torchrec/make_golden.py --torchrec-git "$GIT" --tasks "$TMP/$LAST.json" \
    --source "$SRC" --out "$OUT/$file" "$@"
}

groups=${*:-neuroshard_4 neuroshard_8 big_500x8 options}
for g in $groups; do
  case $g in
  neuroshard_4)
    tasks n4_s1 --protocol neuroshard --devices 4 --count 10 --seed 1 --max-dim 128 && LAST=n4_s1
    golden neuroshard_4.json --name-suffix=-4gib-s1
    tasks n4_s2 --protocol neuroshard --devices 4 --count 10 --seed 2 --memory-gib 1 --max-dim 128 && LAST=n4_s2
    golden neuroshard_4.json --append --name-suffix=-1gib-s2
    ;;
  neuroshard_8)
    tasks n8_s3 --protocol neuroshard --devices 8 --count 10 --seed 3 --max-dim 128 && LAST=n8_s3
    golden neuroshard_8.json --name-suffix=-4gib-s3
    tasks n8_s3m --protocol neuroshard --devices 8 --count 10 --seed 3 --memory-gib 1 --max-dim 128 && LAST=n8_s3m
    golden neuroshard_8.json --append --name-suffix=-1gib-s3
    ;;
  big_500x8)
    BIG_TYPES=${BIG_TYPES:-tw,cw}
    BIG_TAG=${BIG_TYPES//,/+}
    tasks b64 --protocol neuroshard --devices 8 --count 1 --tables 500 --seed 5 --memory-gib 64 --max-dim 128 && LAST=b64
    golden big_500x8.json --name-suffix=-64gib-$BIG_TAG --sharding-types "$BIG_TYPES"
    tasks b48 --protocol neuroshard --devices 8 --count 1 --tables 500 --seed 5 --memory-gib 48 --max-dim 128 && LAST=b48
    golden big_500x8.json --append --name-suffix=-48gib-$BIG_TAG --sharding-types "$BIG_TYPES"
    ;;
  big_500x8_full)
    # TorchRec's full default on the 48-GiB task: slow (tens of minutes) and memory-hungry
    # (over 13 GB); not in the default list of groups.
    tasks b48 --protocol neuroshard --devices 8 --count 1 --tables 500 --seed 5 --memory-gib 48 --max-dim 128 && LAST=b48
    golden big_500x8_full.json --name-suffix=-48gib-all
    ;;
  options)
    tasks o4 --protocol neuroshard --devices 4 --count 10 --seed 1 --max-dim 128 && LAST=o4
    golden options.json --only 0 1 2 --name-suffix=-minpart32 --min-partition 32
    golden options.json --append --only 3 4 5 --name-suffix=-fused --kernels fused
    golden options.json --append --only 6 --name-suffix=-fp16 --dtype fp16
    golden options.json --append --only 7 --name-suffix=-adam --optimizer adam
    golden options.json --append --only 8 --name-suffix=-rowwise_adagrad --optimizer rowwise_adagrad
    golden options.json --append --only 9 --name-suffix=-tw-cw --sharding-types tw,cw
    tasks o8m --protocol neuroshard --devices 8 --count 10 --seed 3 --memory-gib 1 --max-dim 128 && LAST=o8m
    golden options.json --append --only 0 1 2 --name-suffix=-1gib-minpart32 --min-partition 32
    golden options.json --append --only 3 4 5 --name-suffix=-1gib-fused-uvm --kernels fused,fused_uvm
    golden options.json --append --only 6 --name-suffix=-1gib-fp16 --dtype fp16
    golden options.json --append --only 7 --name-suffix=-1gib-adam --optimizer adam
    tasks o16 --protocol neuroshard --devices 16 --count 2 --seed 4 --max-dim 128 && LAST=o16
    golden options.json --append --name-suffix=-2hosts
    tasks o16m --protocol neuroshard --devices 16 --count 2 --seed 4 --memory-gib 2 --max-dim 128 && LAST=o16m
    golden options.json --append --name-suffix=-2hosts-2gib
    ;;
  *)
    echo "unknown group $g" >&2
    exit 2
    ;;
  esac
done

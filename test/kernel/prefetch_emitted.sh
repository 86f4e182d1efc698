#!/usr/bin/env bash
# Checks that the built CPU kernels prefetch: every AVX2 / AVX-512 forward_bags
# and backward_segments instantiation in the binary must contain at least one
# prefetch instruction. GCC 12 once deleted the forward's prefetch from every
# instantiation without a warning (see prefetch_bytes in
# include/embplan/kernel/detail/embedding_bag_common.hpp); the results stay
# right without it, only slower, so no other test would notice.
#
#   prefetch_emitted.sh OBJDUMP BINARY
set -euo pipefail
objdump=$1
binary=$2

"$objdump" -d --no-show-raw-insn -C "$binary" | awk '
  /^[0-9a-f]+ <.*>:$/ {
    name = $0
    sub(/^[0-9a-f]+ </, "", name)
    sub(/>:$/, "", name)
    kernel = (name ~ /kernel::detail::avx(2|512)::(forward_bags|backward_segments)</)
    if (kernel) {
      seen[name] = 0
      kind = name
      sub(/<.*/, "", kind)
      kinds[kind]++
    }
    next
  }
  kernel && /prefetch/ { seen[name]++ }
  END {
    n = 0; missing = 0
    for (f in seen) {
      n++
      if (seen[f] == 0) { print "no prefetch in: " f; missing++ }
    }
    n_kinds = 0
    for (k in kinds) { printf "%d instantiations of %s\n", kinds[k], k; n_kinds++ }
    if (n_kinds != 4) {
      print "expected the forward and the backward of both vector paths, found " n_kinds " kinds"
      exit 1
    }
    printf "%d kernel functions, %d without a prefetch\n", n, missing
    exit missing > 0
  }'

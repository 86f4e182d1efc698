#pragma once
// Stable LSD radix sort over only the key bits that can be non-zero — the CPU
// twin of cub::DeviceRadixSort::SortPairs(..., begin_bit = 0, end_bit) that the
// CUDA backward runs on linearised row ids (docs/measuring.md, "Kernels").
// Stability is what keeps each row's gradient contributions in lookup order.
#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

// Widest digit: 2^11 counters (8 KiB) per pass stay in L1, and 2^11 scatter
// streams stay within what the write-combining buffers and TLB can follow.
inline constexpr int radix_max_digit_bits = 11;

// Sorts `data` by key(element) bits [0, end_bit) (key returns an unsigned
// integer), using `scratch` (same size) and `counts` as working memory; returns
// whichever of the two spans holds the result. Passes whose digit is the same
// for every element are skipped (they would not move anything).
template <class Elem, class Key>
std::span<Elem> radix_sort(std::span<Elem> data, std::span<Elem> scratch, int end_bit, Key key,
                           std::vector<std::uint32_t>& counts) {
  const std::size_t n = data.size();
  if (n < 2 || end_bit <= 0) return data;
  const int passes = (end_bit + radix_max_digit_bits - 1) / radix_max_digit_bits;
  const int digit_bits = (end_bit + passes - 1) / passes;
  const std::size_t buckets = std::size_t{1} << digit_bits;
  const auto mask = static_cast<std::uint64_t>(buckets - 1);
  counts.assign(static_cast<std::size_t>(passes) * buckets, 0);

  // One read of the input histograms every pass's digit.
  for (const Elem& e : data) {
    const auto k = static_cast<std::uint64_t>(key(e));
    for (int p = 0; p < passes; ++p)
      ++counts[static_cast<std::size_t>(p) * buckets + ((k >> (p * digit_bits)) & mask)];
  }

  Elem* src = data.data();
  Elem* dst = scratch.data();
  for (int p = 0; p < passes; ++p) {
    std::uint32_t* c = counts.data() + static_cast<std::size_t>(p) * buckets;
    if (std::find(c, c + buckets, static_cast<std::uint32_t>(n)) != c + buckets) continue;
    std::uint32_t sum = 0;  // exclusive scan: counts become write positions
    for (std::size_t b = 0; b < buckets; ++b)
      sum += std::exchange(c[b], sum);
    const int shift = p * digit_bits;
    for (std::size_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::uint64_t>(key(src[i]));
      dst[c[(k >> shift) & mask]++] = src[i];
    }
    std::swap(src, dst);
  }
  return src == data.data() ? data : scratch;
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail

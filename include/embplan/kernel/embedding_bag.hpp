#pragma once
// The fused multi-table embedding bag on the CPU, in FBGEMM's TBE layout
// (kernel/tbe.hpp): the reference the CUDA kernel is checked against, and the
// meter of a machine without a GPU (docs/measuring.md, "Kernels").
// Single-threaded on purpose: the meter times one device by itself, and
// repeatable timings matter more than cores.
// Forward, per bag and output column, in fp32: the bag's lookups summed in
// order (acc + W[i][d], or fma(psw[i], W[i][d], acc) with per-sample
// weights), then scaled by index::bag_scale; fp16 weights widened exactly.
// Backward (exact SGD), the CUDA design run sequentially: linearise each
// lookup's row, stable radix sort of (linear row, position), run-length
// encode into one segment per unique row, then per segment and column
// g = fma(factor_j, grad, g) over its lookups in position order and one
// W = fma(-learning_rate, g, W) (fp16: in fp32, rounded to half once).
// The CUDA kernel sums each segment in the same order unless it splits a hot
// segment across thread groups, which reassociates that row's sum.
// Invariant: every instruction-set path (scalar, AVX2+FMA+F16C, AVX-512)
// performs exactly these operations, so they agree bit for bit.
// Design notes, with the exact formulas: docs/design/embedding-bag-kernels.md.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/kernel/detail/cpu_features.hpp"
#include "embplan/kernel/detail/embedding_bag_avx2.hpp"
#include "embplan/kernel/detail/embedding_bag_avx512.hpp"
#include "embplan/kernel/detail/embedding_bag_common.hpp"
#include "embplan/kernel/detail/embedding_bag_scalar.hpp"
#include "embplan/kernel/detail/radix_sort.hpp"
#include "embplan/kernel/tbe.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel {

// The weight types of a TBE: fp32, or fp16 with fp32 accumulation.
template <class T>
concept embedding_weight = std::same_as<T, float> || std::same_as<T, half>;

// The instruction-set paths of the CPU kernels.
enum class isa : std::uint8_t {
  scalar,  // portable C++
  avx2,    // AVX2 + FMA + F16C
  avx512,  // AVX-512 F + BW + VL
};

constexpr std::string_view isa_name(isa which) noexcept {
  switch (which) {
    case isa::scalar:
      return "scalar";
    case isa::avx2:
      return "avx2";
    case isa::avx512:
      return "avx512";
  }
  return "unknown";
}

inline bool isa_supported(isa which) noexcept {
  switch (which) {
    case isa::scalar:
      return true;
    case isa::avx2:
      return detail::cpu_has_avx2();
    case isa::avx512:
      return detail::cpu_has_avx512();
  }
  return false;
}

// The fastest path this CPU runs (what the public functions use by default).
inline isa best_isa() noexcept {
  if (isa_supported(isa::avx512)) return isa::avx512;
  if (isa_supported(isa::avx2)) return isa::avx2;
  return isa::scalar;
}

// Every path this CPU runs, slowest first (for tests and benchmarks).
inline std::vector<isa> supported_isas() {
  std::vector<isa> out;
  for (const isa which : {isa::scalar, isa::avx2, isa::avx512}) {
    if (isa_supported(which)) out.push_back(which);
  }
  return out;
}

// Allocates on 64-byte (cache-line) boundaries. Weights held this way start
// every row on a cache line whenever dim * sizeof(Weight) is a multiple of 64,
// so a lookup touches as few lines as possible: with std::vector's default
// 16-byte alignment a dim-16 fp32 row straddles two lines, and random lookups
// run measurably slower (docs/design/embedding-bag-kernels.md). Use it (or
// any 64-byte aligned storage) for weights that are measured.
//
// Blocks of 2 MiB or more are aligned to 2 MiB and, on Linux, advised to the
// kernel as transparent huge pages (madvise(MADV_HUGEPAGE); Linux's default
// THP mode "madvise" honours only advised memory). Random lookups into a
// table of hundreds of MiB otherwise miss the TLB on every row (the forward's
// gain: docs/design/embedding-bag-kernels.md). A GPU's large pages give it
// the same reach. The advice is best effort: the
// memory stays valid if the kernel declines it.
// Weights whose dims are not a multiple of the vector width (16 fp32 lanes
// with AVX-512, 8 with AVX2) are read with masked loads: the masked-off
// lanes do not read memory, but where they reach into a page that was never
// touched the CPU suppresses the would-be fault with a microcode assist, on
// every such load — the last rows of a buffer that ends at an untouched page
// then cost hundreds of cycles per lookup. Keep slack_elements<Weight> touched
// elements (one cache line) after the last row of a buffer that is timed.
template <class Weight>
inline constexpr std::size_t slack_elements = 64 / sizeof(Weight);

template <class T>
struct cache_aligned_allocator {
  using value_type = T;
  static constexpr std::align_val_t alignment{64};
  static constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;
  static constexpr std::align_val_t huge_alignment{huge_page_bytes};

  cache_aligned_allocator() noexcept = default;
  template <class U>
  cache_aligned_allocator(const cache_aligned_allocator<U>&) noexcept {}  // NOLINT: rebind

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_page_bytes) return static_cast<T*>(::operator new(bytes, alignment));
    void* p = ::operator new(bytes, huge_alignment);
#if defined(__linux__)
    (void)::madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ::operator delete(p, n * sizeof(T) < huge_page_bytes ? alignment : huge_alignment);
  }
  template <class U>
  friend bool operator==(const cache_aligned_allocator&,
                         const cache_aligned_allocator<U>&) noexcept {
    return true;
  }
};

template <class T>
using cache_aligned_vector = std::vector<T, cache_aligned_allocator<T>>;

class backward_workspace;

namespace detail {

// (linear row, lookup position) when the row id needs more than 32 bits.
struct wide_pair {
  std::uint64_t row = 0;
  std::uint64_t position = 0;
};

struct backward_buffers {
  std::vector<std::uint64_t> packed, packed_scratch;  // row << 32 | position
  std::vector<wide_pair> wide, wide_scratch;
  std::vector<std::uint32_t> counts;            // radix histograms
  std::vector<lookup_info> info;                // by lookup position
  std::vector<std::uint32_t> sorted_positions;  // lookup positions in sorted order
  std::vector<std::int64_t> segment_rows;       // [segments]: linear row of each segment
  std::vector<std::uint32_t> segment_begin;     // [segments + 1]: into the sorted order
  std::size_t segments = 0;                     // (the vectors keep their largest size)
  std::vector<float> row_scratch;               // one row's gradient (scalar path)

  std::size_t bytes() const noexcept {
    const auto b = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
    return b(packed) + b(packed_scratch) + b(wide) + b(wide_scratch) + b(counts) + b(info) +
           b(sorted_positions) + b(segment_rows) + b(segment_begin) + b(row_scratch);
  }
};

inline backward_buffers& buffers_of(backward_workspace& ws) noexcept;

}  // namespace detail

// Reusable buffers of embedding_bag_backward_sgd: they grow to the largest
// batch seen and are kept, so repeated calls of one shape allocate nothing
// after the first. Not shared between threads.
class backward_workspace {
 public:
  // Memory held, in bytes.
  std::size_t bytes() const noexcept { return buffers_.bytes(); }

 private:
  detail::backward_buffers buffers_;
  friend detail::backward_buffers& detail::buffers_of(backward_workspace&) noexcept;
};

namespace detail {

inline backward_buffers& buffers_of(backward_workspace& ws) noexcept {
  return ws.buffers_;
}

// ---------------------------------------------------------------- forward
template <embedding_weight Weight>
void forward_unchecked(const tbe_layout& layout, std::span<const Weight> weights,
                       const tbe_batch_view& batch, pooling_mode mode, std::span<float> output,
                       isa which = best_isa()) {
  const std::int64_t batch_size = batch.batch_size;
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const auto ut = static_cast<std::size_t>(t);
    const forward_table_args<Weight> a{
        .weights = weights.data() + layout.weights_offsets[ut],
        .dim = layout.dims[ut],
        .indices = batch.indices.data(),
        .offsets = batch.offsets.data() + index::bag(t, 0, batch_size),
        .per_sample_weights =
            batch.per_sample_weights.empty() ? nullptr : batch.per_sample_weights.data(),
        .batch_size = batch_size,
        .mode = mode,
        .output = output.data(),
        .total_dim = layout.total_dim(),
        .d_offset = layout.d_offsets[ut],
    };
    switch (which) {
#if EMBPLAN_KERNEL_X86
      case isa::avx512:
        avx512::forward_table(a);
        break;
      case isa::avx2:
        avx2::forward_table(a);
        break;
#endif
      default:
        scalar::forward_table(a);
        break;
    }
  }
}

// ---------------------------------------------------------------- backward
// Linearise, sort and run-length-encode one batch (the CUDA design: linearize ->
// SortPairs over the needed bits -> RunLengthEncode -> scan), with pairs of type
// Elem = make(row, position). Leaves sorted_positions, segment_rows,
// segment_begin and segments in `buf`.
//
// Lookups are table-major and table t's linear ids fill [row_offsets[t],
// row_offsets[t+1]), so the stable sort of all (linear id, position) pairs is
// the concatenation of per-table stable sorts of (row, position) over
// radix_end_bit(rows[t]) bits: the same order, and each table's sort works
// within L2 (a table's share of a batch is a few hundred KiB, the batch's many MiB).
template <class Elem, class Make, class Row, class Position>
void sort_lookups(const tbe_layout& layout, const tbe_batch_view& batch, pooling_mode mode,
                  std::vector<Elem>& pairs, std::vector<Elem>& scratch, backward_buffers& buf,
                  Make make, Row row_of, Position position_of) {
  const std::size_t n = batch.indices.size();
  pairs.resize(n);
  scratch.resize(n);
  buf.info.resize(n);
  buf.sorted_positions.resize(n);
  // At most one segment per lookup; buf.segments says how many there are.
  if (buf.segment_rows.size() < n) buf.segment_rows.resize(n);
  if (buf.segment_begin.size() < n + 1) buf.segment_begin.resize(n + 1);
  std::size_t segments = 0;
  const bool weighted = !batch.per_sample_weights.empty();
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const auto first = static_cast<std::size_t>(
        batch.offsets[static_cast<std::size_t>(index::bag(t, 0, batch.batch_size))]);
    const auto last = static_cast<std::size_t>(
        batch.offsets[static_cast<std::size_t>(index::bag(t + 1, 0, batch.batch_size))]);
    for (std::int64_t b = 0; b < batch.batch_size; ++b) {
      const auto bag = static_cast<std::size_t>(index::bag(t, b, batch.batch_size));
      const auto begin = static_cast<std::size_t>(batch.offsets[bag]);
      const auto end = static_cast<std::size_t>(batch.offsets[bag + 1]);
      const float scale = index::bag_scale(mode, static_cast<std::int64_t>(end - begin));
      for (std::size_t i = begin; i < end; ++i) {
        pairs[i] = make(static_cast<std::uint64_t>(batch.indices[i]), i);
        buf.info[i] = {static_cast<std::uint32_t>(b),
                       weighted ? scale * batch.per_sample_weights[i] : scale};
      }
    }
    const std::span<const Elem> sorted = radix_sort(
        std::span<Elem>(pairs).subspan(first, last - first),
        std::span<Elem>(scratch).subspan(first, last - first),
        index::radix_end_bit(layout.rows[static_cast<std::size_t>(t)]), row_of, buf.counts);
    const std::int64_t row_offset = layout.row_offsets[static_cast<std::size_t>(t)];
    std::int64_t previous = -1;
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      const std::int64_t row =
          index::linear_row(row_offset, static_cast<std::int64_t>(row_of(sorted[k])));
      buf.sorted_positions[first + k] = static_cast<std::uint32_t>(position_of(sorted[k]));
      if (row != previous) {
        buf.segment_rows[segments] = row;
        buf.segment_begin[segments] = static_cast<std::uint32_t>(first + k);
        ++segments;
        previous = row;
      }
    }
  }
  buf.segment_begin[segments] = static_cast<std::uint32_t>(n);
  buf.segments = segments;
}

// Fills buf.sorted_positions / segment_rows / segment_begin / segments for a
// batch:
// pairs packed in one 64-bit word (row << 32 | position) when every table's
// row ids fit in 32 bits, else 16-byte pairs (`wide` forces those, for tests).
inline void linearise_and_sort(const tbe_layout& layout, const tbe_batch_view& batch,
                               pooling_mode mode, backward_buffers& buf, bool wide = false) {
  const bool narrow_rows = std::all_of(layout.rows.begin(), layout.rows.end(), [](std::int64_t r) {
    return index::radix_end_bit(r) <= 32;
  });
  if (!wide && narrow_rows) {
    sort_lookups(
        layout, batch, mode, buf.packed, buf.packed_scratch, buf,
        [](std::uint64_t row, std::uint64_t position) { return row << 32 | position; },
        [](std::uint64_t e) { return e >> 32; }, [](std::uint64_t e) { return e & 0xffffffffu; });
  } else {
    sort_lookups(
        layout, batch, mode, buf.wide, buf.wide_scratch, buf,
        [](std::uint64_t row, std::uint64_t position) {
          return wide_pair{row, position};
        },
        [](const wide_pair& e) { return e.row; }, [](const wide_pair& e) { return e.position; });
  }
}

template <embedding_weight Weight>
void backward_sgd_unchecked(const tbe_layout& layout, std::span<Weight> weights,
                            const tbe_batch_view& batch, pooling_mode mode,
                            std::span<const float> grad_output, float learning_rate,
                            backward_workspace& ws, isa which = best_isa()) {
  backward_buffers& buf = buffers_of(ws);
  linearise_and_sort(layout, batch, mode, buf);
  if (which == isa::scalar) {
    const auto widest = std::max_element(layout.dims.begin(), layout.dims.end());
    buf.row_scratch.resize(widest == layout.dims.end() ? 0 : static_cast<std::size_t>(*widest));
  }

  // Segments are in linear-row order, hence grouped by table.
  const auto segments = static_cast<std::int64_t>(buf.segments);
  std::int64_t first = 0;
  for (std::int64_t t = 0; t < layout.tables() && first < segments; ++t) {
    const auto ut = static_cast<std::size_t>(t);
    const auto rows_begin = buf.segment_rows.begin();
    const std::int64_t last =
        std::lower_bound(rows_begin + first, rows_begin + segments, layout.row_offsets[ut + 1]) -
        rows_begin;
    const backward_table_args<Weight> a{
        .weights = weights.data() + layout.weights_offsets[ut],
        .dim = layout.dims[ut],
        .row_offset = layout.row_offsets[ut],
        .segment_rows = buf.segment_rows.data() + first,
        .segment_begin = buf.segment_begin.data() + first,
        .segments = last - first,
        .sorted_positions = buf.sorted_positions.data(),
        .info = buf.info.data(),
        .grad_output = grad_output.data(),
        .total_dim = layout.total_dim(),
        .d_offset = layout.d_offsets[ut],
        .learning_rate = learning_rate,
    };
    first = last;
    if (a.segments == 0) continue;
    switch (which) {
#if EMBPLAN_KERNEL_X86
      case isa::avx512:
        avx512::backward_table(a);
        break;
      case isa::avx2:
        avx2::backward_table(a);
        break;
#endif
      default:
        scalar::backward_table(a, buf.row_scratch.data());
        break;
    }
  }
}

// ---------------------------------------------------------------- checks
inline void check_isa(isa which) {
  if (!isa_supported(which)) {
    fail("embedding_bag.isa", isa_name(which),
         "an instruction set this CPU supports (best: " + std::string(isa_name(best_isa())) + ")");
  }
}

inline void check_size(std::string_view field, std::size_t size, std::uint64_t expected,
                       std::string_view what) {
  if (size != expected) fail(field, size, std::string(what) + " = " + std::to_string(expected));
}

inline std::uint64_t output_elements(const tbe_layout& layout, const tbe_batch_view& batch) {
  return checked_mul(static_cast<std::uint64_t>(batch.batch_size),
                     static_cast<std::uint64_t>(layout.total_dim()), "embedding_bag.output");
}

}  // namespace detail

// ---------------------------------------------------------------- public API
// Pooled lookups of every table: output[b][d_offsets[t] ..] = the pooled rows
// of bag (t, b); output ([batch_size][total_dim]) is overwritten. Checks the
// batch (kernel::validate) and the sizes of weights and output first.
template <embedding_weight Weight>
void embedding_bag_forward(const tbe_layout& layout, std::span<const Weight> weights,
                           const tbe_batch_view& batch, pooling_mode mode, std::span<float> output,
                           isa which = best_isa()) {
  validate(layout, batch);
  detail::check_size("embedding_bag.weights.size", weights.size(),
                     static_cast<std::uint64_t>(layout.total_weights()), "layout.total_weights()");
  detail::check_size("embedding_bag.output.size", output.size(),
                     detail::output_elements(layout, batch), "batch_size x total_dim");
  detail::check_isa(which);
  detail::forward_unchecked(layout, weights, batch, mode, output, which);
}

// Exact SGD for the forward above, given d(loss)/d(output) (grad_output,
// [batch_size][total_dim]): every touched row gets all its gradients summed,
// then one step w -= learning_rate * g (docs/design/embedding-bag-kernels.md
// gives the order of operations); rows not looked up are left bit-for-bit
// unchanged.
template <embedding_weight Weight>
void embedding_bag_backward_sgd(const tbe_layout& layout, std::span<Weight> weights,
                                const tbe_batch_view& batch, pooling_mode mode,
                                std::span<const float> grad_output, float learning_rate,
                                backward_workspace& ws, isa which = best_isa()) {
  validate(layout, batch);
  detail::check_size("embedding_bag.weights.size", weights.size(),
                     static_cast<std::uint64_t>(layout.total_weights()), "layout.total_weights()");
  detail::check_size("embedding_bag.grad_output.size", grad_output.size(),
                     detail::output_elements(layout, batch), "batch_size x total_dim");
  constexpr auto max_u32 = std::uint64_t{std::numeric_limits<std::uint32_t>::max()};
  if (batch.indices.size() > max_u32) {
    detail::fail("embedding_bag.indices.size", batch.indices.size(),
                 "at most 2^32 - 1 lookups per backward call");
  }
  if (static_cast<std::uint64_t>(batch.batch_size) > max_u32) {
    detail::fail("embedding_bag.batch_size", batch.batch_size, "at most 2^32 - 1 samples");
  }
  if (!(learning_rate == learning_rate) ||
      learning_rate == std::numeric_limits<float>::infinity() ||
      learning_rate == -std::numeric_limits<float>::infinity()) {
    detail::fail("embedding_bag.learning_rate", learning_rate, "a finite number");
  }
  detail::check_isa(which);
  detail::backward_sgd_unchecked(layout, weights, batch, mode, grad_output, learning_rate, ws,
                                 which);
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel

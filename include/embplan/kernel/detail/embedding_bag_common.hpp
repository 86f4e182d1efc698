#pragma once
// What the scalar, AVX2 and AVX-512 bodies of the CPU embedding bag share: the
// per-table argument blocks the dispatcher (kernel/embedding_bag.hpp) hands
// them, the per-lookup record of the backward, and a few helpers.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "embplan/kernel/tbe.hpp"
#include "embplan/version.hpp"

// Full unrolling of the loops over a chunk's vectors, so its accumulators
// live in registers (nvcc's front end, compiling a .cu that includes the CPU
// kernels, does not know the pragma: GCC still unrolls such short loops at -O3).
#if defined(__CUDACC__)
#define EMBPLAN_UNROLL_VECTORS
#else
#define EMBPLAN_UNROLL_VECTORS _Pragma("GCC unroll 8")
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EMBPLAN_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define EMBPLAN_ALWAYS_INLINE inline
#endif

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

// One table's share of a forward call. Pointers are to the whole batch; the
// table's bags are offsets[0 .. batch_size] (positions in indices).
template <class Weight>
struct forward_table_args {
  const Weight* weights = nullptr;  // the table's [rows x dim] block
  std::int64_t dim = 0;
  const std::int64_t* indices = nullptr;
  const std::int64_t* offsets = nullptr;      // this table's batch_size + 1 entries
  const float* per_sample_weights = nullptr;  // null: every weight is 1
  std::int64_t batch_size = 0;
  pooling_mode mode = pooling_mode::sum;
  float* output = nullptr;  // [batch_size][total_dim]
  std::int64_t total_dim = 0;
  std::int64_t d_offset = 0;
};

// The backward's view of one lookup, written in lookup order before the sort:
// which sample's gradient row it reads and by what it scales it
// (index::bag_scale times its per-sample weight, rounded to fp32 once).
struct lookup_info {
  std::uint32_t sample = 0;
  float factor = 0.0f;
};

// One table's segments (runs of equal linear row id after the sort).
// Segment s covers sorted_positions[segment_begin[s] .. segment_begin[s+1]),
// lookup positions in increasing order.
template <class Weight>
struct backward_table_args {
  Weight* weights = nullptr;  // the table's [rows x dim] block
  std::int64_t dim = 0;
  std::int64_t row_offset = 0;                   // linear id of the table's row 0
  const std::int64_t* segment_rows = nullptr;    // linear row id per segment
  const std::uint32_t* segment_begin = nullptr;  // segments + 1 entries
  std::int64_t segments = 0;
  const std::uint32_t* sorted_positions = nullptr;
  const lookup_info* info = nullptr;   // indexed by lookup position
  const float* grad_output = nullptr;  // [batch_size][total_dim]
  std::int64_t total_dim = 0;
  std::int64_t d_offset = 0;
  float learning_rate = 0.0f;
};

// Software prefetch distance, in lookups (forward) or segments (backward):
// far enough ahead to cover a DRAM miss at a few ns per lookup (FBGEMM's
// default is 16 lookups). The forward's depends on the row size (below).
inline constexpr std::int64_t prefetch_lookups = 16;
inline constexpr std::int64_t prefetch_segments = 8;

// The forward's distance for rows of `row_bytes`: enough lookups ahead to keep
// about 8 KiB of rows in flight, at least FBGEMM's 16 and at most 256 lookups.
// A row of one cache line or less is summed in a few cycles, so short rows
// need many lookups ahead to cover a DRAM miss; long rows take long enough to
// sum that a short distance suffices (the distances tried:
// docs/design/embedding-bag-kernels.md).
constexpr std::int64_t forward_prefetch_distance(std::int64_t row_bytes) noexcept {
  constexpr std::int64_t bytes_in_flight = 8192;
  constexpr std::int64_t most = 256;
  if (row_bytes <= 0) {
    return most;
  }
  return std::clamp(bytes_in_flight / row_bytes, prefetch_lookups, most);
}

// Touches every cache line of bytes [p, p + bytes).
//
// Always inlined, and it must be: GCC 12 finds this function "const" (a
// prefetch has no visible effect and the loop is finite), and a call to it
// that early inlining leaves in place (the forward's callers are always_inline
// bodies of target("avx2/avx512") functions) is deleted as a call whose result
// is unused. Until it was always_inline, every AVX2 and AVX-512 forward
// instantiation was built without its prefetch. test/kernel/prefetch_emitted.sh
// checks the disassembly of the built kernels.
EMBPLAN_ALWAYS_INLINE void prefetch_bytes(const void* p, std::int64_t bytes) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
  const auto last = reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes);
  for (std::uintptr_t line = first; line < last; line += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
#else
  (void)p;
  (void)bytes;
#endif
}

// Calls f(std::integral_constant<int, n>{}) for n in [0, Max]: a runtime
// vector count becomes a template argument, so accumulators stay in registers.
template <int Max, class F>
void with_count(int n, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((n == I ? (f(std::integral_constant<int, I>{}), 0) : 0), ...);
  }
  (std::make_integer_sequence<int, Max + 1>{});
}

// A row of `dim` columns as processed by a kernel whose registers hold
// `chunk_vectors` vectors of `width` floats: full chunks of width * chunk_vectors
// columns, then a tail chunk of tail_vectors vectors, the last one partial
// (tail_columns of width) when tail_masked.
struct column_split {
  std::int64_t full_chunks = 0;
  int tail_vectors = 0;
  bool tail_masked = false;
  int tail_columns = 0;  // columns in the last vector when tail_masked
};

constexpr column_split split_columns(std::int64_t dim, int width, int chunk_vectors) noexcept {
  const std::int64_t chunk = std::int64_t{width} * chunk_vectors;
  const auto rest = static_cast<int>(dim % chunk);
  return {.full_chunks = dim / chunk,
          .tail_vectors = (rest + width - 1) / width,
          .tail_masked = rest % width != 0,
          .tail_columns = rest % width};
}

// Likewise for a runtime bool.
template <class F>
void with_bool(bool b, F&& f) {
  if (b) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

// What a vector instruction set gives the shared vector body
// (detail/embedding_bag_vector.hpp): `vec` holds `width` floats; a chunk is
// `chunk_vectors` of them (its accumulators stay in registers); `tail` is a
// partial last vector of 1..width-1 columns (make_tail); loads widen fp16
// exactly and stores narrow to fp16 rounding to nearest even, as to_float /
// to_half; fma(a, b, c) = a * b + c rounded once. All of it always inline and
// compiled for the ISA's target, as the body is.
template <class I>
concept vector_isa = requires(const float* src, const half* src_half, float* dst, half* dst_half,
                              typename I::vec v, const typename I::tail& tail, float x,
                              int columns) {
  requires std::same_as<decltype(I::width), const int>;
  requires std::same_as<decltype(I::chunk_vectors), const int>;
  { I::make_tail(columns) } -> std::same_as<typename I::tail>;
  { I::zero() } -> std::same_as<typename I::vec>;
  { I::broadcast(x) } -> std::same_as<typename I::vec>;
  { I::add(v, v) } -> std::same_as<typename I::vec>;
  { I::mul(v, v) } -> std::same_as<typename I::vec>;
  { I::fma(v, v, v) } -> std::same_as<typename I::vec>;
  { I::load(src) } -> std::same_as<typename I::vec>;
  { I::load(src_half) } -> std::same_as<typename I::vec>;
  { I::load(src, tail) } -> std::same_as<typename I::vec>;
  { I::load(src_half, tail) } -> std::same_as<typename I::vec>;
  I::store(dst, v);
  I::store(dst_half, v);
  I::store(dst, v, tail);
  I::store(dst_half, v, tail);
};

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail

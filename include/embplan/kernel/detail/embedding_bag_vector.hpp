// The vector body of the CPU embedding bag, written once for every vector
// instruction set (detail/embedding_bag_avx2.hpp, detail/embedding_bag_avx512.hpp):
// a template over a vector_isa (detail/embedding_bag_common.hpp) whose
// functions carry that instruction set's __attribute__((target)).
//
// No #pragma once: each instruction-set header includes this file once, after
// defining
//   EMBPLAN_VECTOR_NAMESPACE  the namespace to define it in (avx2, avx512)
//   EMBPLAN_VECTOR_ISA        the vector_isa its entry points instantiate
//   EMBPLAN_VECTOR_TARGET     the __attribute__((target(...))) of that ISA
// and this file #undefs them. Why not one template for all: a target attribute
// cannot depend on a template argument, and neither GCC nor Clang inlines an
// always_inline intrinsic into a function without its target (nor lets
// lambdas inherit it), so the body is compiled once per target from the same
// text. Included by itself (the header-set check) it defines nothing.
//
// A row is processed in chunks of Isa::chunk_vectors vectors held in
// registers, then a tail chunk of 1..chunk_vectors vectors whose last vector is
// partial when the dim is not a multiple of Isa::width; dims up to one chunk
// are one pass, larger dims revisit the bag's rows once per chunk (they are in
// L1 by then). The arithmetic per element is the one every path shares:
// acc = acc + x (no per-sample weights) or acc = fma(w, x, acc), lookups in
// order, then out = acc * bag scale; the backward's g = fma(factor, grad, g)
// in segment order, w = fma(-lr, g, w).
#include <algorithm>
#include <cstdint>

#include "embplan/kernel/detail/cpu_features.hpp"
#include "embplan/kernel/detail/embedding_bag_common.hpp"
#include "embplan/version.hpp"

#if defined(EMBPLAN_VECTOR_NAMESPACE)

// Every function of the body is compiled for the ISA's target; the helpers
// are always inlined into forward_bags / backward_segments, whose target they
// share (prefetch_bytes too, see there).
#define EMBPLAN_VECTOR_INLINE EMBPLAN_VECTOR_TARGET __attribute__((always_inline)) inline

namespace embplan::inline EMBPLAN_ABI::kernel::detail::EMBPLAN_VECTOR_NAMESPACE {

// Vector v of a chunk of NV vectors: loaded whole, or partial when it is the
// last one of a masked chunk. (Plain loops with constant trip counts, fully
// unrolled: lambdas and fold expressions would not inherit the target.)
template <vector_isa Isa, int NV, bool Masked, class T>
EMBPLAN_VECTOR_INLINE typename Isa::vec load_part(const T* p, int v,
                                                  const typename Isa::tail& tail) {
  return Masked && v == NV - 1 ? Isa::load(p + v * Isa::width, tail)
                               : Isa::load(p + v * Isa::width);
}
template <vector_isa Isa, int NV, bool Masked, class T>
EMBPLAN_VECTOR_INLINE void store_part(T* p, int v, typename Isa::vec x,
                                      const typename Isa::tail& tail) {
  if (Masked && v == NV - 1) {
    Isa::store(p + v * Isa::width, x, tail);
  } else {
    Isa::store(p + v * Isa::width, x);
  }
}

// One bag, columns [col, col + NV * width) of the table: sum its rows in
// lookup order. When prefetch_end > 0, the row `distance` lookups ahead
// (forward_prefetch_distance; at most the one at prefetch_end - 1) is
// prefetched whole.
template <vector_isa Isa, int NV, bool Masked, bool Weighted, class Weight>
EMBPLAN_VECTOR_INLINE void bag_chunk(const forward_table_args<Weight>& a, std::int64_t begin,
                                     std::int64_t end, std::int64_t col,
                                     const typename Isa::tail& tail, std::int64_t prefetch_end,
                                     std::int64_t distance, float scale, float* out) {
  typename Isa::vec acc[NV];
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    acc[v] = Isa::zero();
  const std::int64_t row_bytes = a.dim * static_cast<std::int64_t>(sizeof(Weight));
  for (std::int64_t i = begin; i < end; ++i) {
    // Clamped rather than tested: near the table's end the last row is
    // prefetched again, which costs nothing and keeps the loop branch-free.
    if (prefetch_end > 0) {
      const std::int64_t ahead = std::min(i + distance, prefetch_end - 1);
      prefetch_bytes(a.weights + index::weight_offset(0, a.indices[ahead], a.dim), row_bytes);
    }
    const Weight* row = a.weights + index::weight_offset(0, a.indices[i], a.dim) + col;
    if constexpr (Weighted) {
      const typename Isa::vec w = Isa::broadcast(a.per_sample_weights[i]);
      EMBPLAN_UNROLL_VECTORS
      for (int v = 0; v < NV; ++v)
        acc[v] = Isa::fma(w, load_part<Isa, NV, Masked>(row, v, tail), acc[v]);
    } else {
      EMBPLAN_UNROLL_VECTORS
      for (int v = 0; v < NV; ++v)
        acc[v] = Isa::add(acc[v], load_part<Isa, NV, Masked>(row, v, tail));
    }
  }
  const typename Isa::vec s = Isa::broadcast(scale);
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    store_part<Isa, NV, Masked>(out + col, v, Isa::mul(acc[v], s), tail);
}

// All bags of one table: full chunks, then the tail chunk of TailNV vectors.
// The first chunk of each bag prefetches for the whole row.
template <vector_isa Isa, int TailNV, bool TailMasked, bool Weighted, class Weight>
EMBPLAN_VECTOR_TARGET void forward_bags(const forward_table_args<Weight>& a,
                                        std::int64_t full_chunks, int tail_columns) {
  constexpr std::int64_t chunk_columns = std::int64_t{Isa::width} * Isa::chunk_vectors;
  const typename Isa::tail tail = Isa::make_tail(tail_columns);
  const std::int64_t table_end = a.offsets[a.batch_size];
  // Once per table: the distance divides by the row size.
  const std::int64_t distance =
      forward_prefetch_distance(a.dim * static_cast<std::int64_t>(sizeof(Weight)));
  for (std::int64_t b = 0; b < a.batch_size; ++b) {
    const std::int64_t begin = a.offsets[b];
    const std::int64_t end = a.offsets[b + 1];
    const float scale = index::bag_scale(a.mode, end - begin);
    float* out = a.output + index::output_offset(b, a.total_dim, a.d_offset);
    for (std::int64_t c = 0; c < full_chunks; ++c) {
      bag_chunk<Isa, Isa::chunk_vectors, false, Weighted>(
          a, begin, end, c * chunk_columns, tail, c == 0 ? table_end : 0, distance, scale, out);
    }
    if constexpr (TailNV > 0) {
      bag_chunk<Isa, TailNV, TailMasked, Weighted>(a, begin, end, full_chunks * chunk_columns, tail,
                                                   full_chunks == 0 ? table_end : 0, distance,
                                                   scale, out);
    }
  }
}

// Lambdas do not inherit the target attribute, so they only name the
// instantiation to call; the work happens in forward_bags.
template <class Weight>
void forward_table(const forward_table_args<Weight>& a) {
  using ops = EMBPLAN_VECTOR_ISA;
  const column_split split = split_columns(a.dim, ops::width, ops::chunk_vectors);
  with_count<ops::chunk_vectors>(split.tail_vectors, [&](auto nv) {
    with_bool(split.tail_masked, [&](auto masked) {
      with_bool(a.per_sample_weights != nullptr, [&](auto weighted) {
        forward_bags<ops, nv(), masked(), weighted()>(a, split.full_chunks, split.tail_columns);
      });
    });
  });
}

// One segment, columns [col, col + NV * width): g = sum of its lookups'
// scaled gradient rows in segment order, then one SGD step on the row.
template <vector_isa Isa, int NV, bool Masked, class Weight>
EMBPLAN_VECTOR_INLINE void segment_chunk(const backward_table_args<Weight>& a, Weight* row,
                                         std::uint32_t begin, std::uint32_t end, std::int64_t col,
                                         const typename Isa::tail& tail) {
  typename Isa::vec acc[NV];
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    acc[v] = Isa::zero();
  for (std::uint32_t k = begin; k < end; ++k) {
    const lookup_info info = a.info[a.sorted_positions[k]];
    const float* g =
        a.grad_output + index::output_offset(info.sample, a.total_dim, a.d_offset) + col;
    const typename Isa::vec f = Isa::broadcast(info.factor);
    EMBPLAN_UNROLL_VECTORS
    for (int v = 0; v < NV; ++v)
      acc[v] = Isa::fma(f, load_part<Isa, NV, Masked>(g, v, tail), acc[v]);
  }
  const typename Isa::vec neg_lr = Isa::broadcast(-a.learning_rate);
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v) {
    const typename Isa::vec w = load_part<Isa, NV, Masked>(row + col, v, tail);
    store_part<Isa, NV, Masked>(row + col, v, Isa::fma(neg_lr, acc[v], w), tail);
  }
}

template <vector_isa Isa, int TailNV, bool TailMasked, class Weight>
EMBPLAN_VECTOR_TARGET void backward_segments(const backward_table_args<Weight>& a,
                                             std::int64_t full_chunks, int tail_columns) {
  constexpr std::int64_t chunk_columns = std::int64_t{Isa::width} * Isa::chunk_vectors;
  const typename Isa::tail tail = Isa::make_tail(tail_columns);
  const std::int64_t row_bytes = a.dim * static_cast<std::int64_t>(sizeof(Weight));
  for (std::int64_t s = 0; s < a.segments; ++s) {
    if (s + prefetch_segments < a.segments) {
      const std::int64_t ahead = a.segment_rows[s + prefetch_segments] - a.row_offset;
      prefetch_bytes(a.weights + index::weight_offset(0, ahead, a.dim), row_bytes);
    }
    Weight* row = a.weights + index::weight_offset(0, a.segment_rows[s] - a.row_offset, a.dim);
    const std::uint32_t begin = a.segment_begin[s];
    const std::uint32_t end = a.segment_begin[s + 1];
    for (std::int64_t c = 0; c < full_chunks; ++c)
      segment_chunk<Isa, Isa::chunk_vectors, false>(a, row, begin, end, c * chunk_columns, tail);
    if constexpr (TailNV > 0) {
      segment_chunk<Isa, TailNV, TailMasked>(a, row, begin, end, full_chunks * chunk_columns, tail);
    }
  }
}

template <class Weight>
void backward_table(const backward_table_args<Weight>& a) {
  using ops = EMBPLAN_VECTOR_ISA;
  const column_split split = split_columns(a.dim, ops::width, ops::chunk_vectors);
  with_count<ops::chunk_vectors>(split.tail_vectors, [&](auto nv) {
    with_bool(split.tail_masked, [&](auto masked) {
      backward_segments<ops, nv(), masked()>(a, split.full_chunks, split.tail_columns);
    });
  });
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail::EMBPLAN_VECTOR_NAMESPACE

#undef EMBPLAN_VECTOR_INLINE
#undef EMBPLAN_VECTOR_TARGET
#undef EMBPLAN_VECTOR_ISA
#undef EMBPLAN_VECTOR_NAMESPACE
#endif  // EMBPLAN_VECTOR_NAMESPACE

#pragma once
// AVX-512 body of the CPU embedding bag (16 floats per vector). Compiled with
// __attribute__((target)) so the library needs no -march; chosen at run time
// by kernel/embedding_bag.hpp when the CPU has AVX-512 F/BW/VL.
//
// A row is processed in chunks of 8 vectors (128 columns) held in registers,
// then a tail chunk of 1-8 vectors whose last vector is masked when the dim is
// not a multiple of 16; dims up to 128 are one chunk, larger dims revisit the
// bag's rows once per chunk (they are in L1 by then). The arithmetic per
// element is the one every path shares: acc = acc + x (no per-sample weights)
// or acc = fma(w, x, acc), lookups in order, then out = acc * bag scale; the
// backward's g = fma(factor, grad, g) in segment order, w = fma(-lr, g, w).
#include <algorithm>
#include <cstdint>

#include "embplan/kernel/detail/cpu_features.hpp"
#include "embplan/kernel/detail/embedding_bag_common.hpp"

#if EMBPLAN_KERNEL_X86
#include <immintrin.h>

#define EMBPLAN_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define EMBPLAN_AVX512_INLINE EMBPLAN_AVX512_TARGET __attribute__((always_inline)) inline

namespace embplan::kernel::detail::avx512 {

inline constexpr int width = 16;
inline constexpr int chunk_vectors = 8;

EMBPLAN_AVX512_INLINE __m512 load(const float* p) {
  return _mm512_loadu_ps(p);
}
EMBPLAN_AVX512_INLINE __m512 load(const half* p) {
  // maskz with a full mask, not _mm512_cvtph_ps / _mm512_cvtps_ph: GCC 12 warns
  // on their _mm512_undefined_* (-Wmaybe-uninitialized, GCC bug 105593).
  return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
EMBPLAN_AVX512_INLINE __m512 load(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
EMBPLAN_AVX512_INLINE __m512 load(const half* p, __mmask16 m) {
  return _mm512_maskz_cvtph_ps(0xffff, _mm256_maskz_loadu_epi16(m, p));
}
EMBPLAN_AVX512_INLINE __m256i narrow(__m512 v) {
  return _mm512_maskz_cvtps_ph(0xffff, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
EMBPLAN_AVX512_INLINE void store(float* p, __m512 v) {
  _mm512_storeu_ps(p, v);
}
EMBPLAN_AVX512_INLINE void store(half* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow(v));
}
EMBPLAN_AVX512_INLINE void store(float* p, __m512 v, __mmask16 m) {
  _mm512_mask_storeu_ps(p, m, v);
}
EMBPLAN_AVX512_INLINE void store(half* p, __m512 v, __mmask16 m) {
  _mm256_mask_storeu_epi16(p, m, narrow(v));
}

// Vector v of a chunk of NV vectors: loaded whole, or masked when it is the
// partial last one. (Plain loops with constant trip counts, fully unrolled:
// lambdas and fold expressions would not inherit the target attribute.)
template <int NV, bool Masked, class T>
EMBPLAN_AVX512_INLINE __m512 load_part(const T* p, int v, __mmask16 tail) {
  return Masked && v == NV - 1 ? load(p + v * width, tail) : load(p + v * width);
}
template <int NV, bool Masked, class T>
EMBPLAN_AVX512_INLINE void store_part(T* p, int v, __m512 x, __mmask16 tail) {
  if (Masked && v == NV - 1) {
    store(p + v * width, x, tail);
  } else {
    store(p + v * width, x);
  }
}

// One bag, columns [col, col + NV * width) of the table: sum its rows in
// lookup order. When prefetch_end > 0, the row `distance` lookups ahead
// (forward_prefetch_distance; at most the one at prefetch_end - 1) is
// prefetched whole.
template <int NV, bool Masked, bool Weighted, class Weight>
EMBPLAN_AVX512_INLINE void bag_chunk(const forward_table_args<Weight>& a, std::int64_t begin,
                                     std::int64_t end, std::int64_t col, __mmask16 tail,
                                     std::int64_t prefetch_end, std::int64_t distance, float scale,
                                     float* out) {
  __m512 acc[NV];
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    acc[v] = _mm512_setzero_ps();
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
      const __m512 w = _mm512_set1_ps(a.per_sample_weights[i]);
      EMBPLAN_UNROLL_VECTORS
      for (int v = 0; v < NV; ++v)
        acc[v] = _mm512_fmadd_ps(w, load_part<NV, Masked>(row, v, tail), acc[v]);
    } else {
      EMBPLAN_UNROLL_VECTORS
      for (int v = 0; v < NV; ++v)
        acc[v] = _mm512_add_ps(acc[v], load_part<NV, Masked>(row, v, tail));
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    store_part<NV, Masked>(out + col, v, _mm512_mul_ps(acc[v], s), tail);
}

template <int TailNV, bool TailMasked, bool Weighted, class Weight>
EMBPLAN_AVX512_TARGET void forward_bags(const forward_table_args<Weight>& a,
                                        std::int64_t full_chunks, __mmask16 tail) {
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
      bag_chunk<chunk_vectors, false, Weighted>(a, begin, end, c * chunk_vectors * width, tail,
                                                c == 0 ? table_end : 0, distance, scale, out);
    }
    if constexpr (TailNV > 0) {
      bag_chunk<TailNV, TailMasked, Weighted>(a, begin, end, full_chunks * chunk_vectors * width,
                                              tail, full_chunks == 0 ? table_end : 0, distance,
                                              scale, out);
    }
  }
}

// Lambdas do not inherit the target attribute, so they only name the
// instantiation to call; the work happens in forward_bags.
template <class Weight>
void forward_table(const forward_table_args<Weight>& a) {
  const column_split split = split_columns(a.dim, width, chunk_vectors);
  const auto tail = static_cast<__mmask16>((1u << split.tail_columns) - 1u);
  with_count<chunk_vectors>(split.tail_vectors, [&](auto nv) {
    with_bool(split.tail_masked, [&](auto masked) {
      with_bool(a.per_sample_weights != nullptr, [&](auto weighted) {
        forward_bags<nv(), masked(), weighted()>(a, split.full_chunks, tail);
      });
    });
  });
}

// One segment, columns [col, col + NV * width): g = sum of its lookups'
// scaled gradient rows in segment order, then one SGD step on the row.
template <int NV, bool Masked, class Weight>
EMBPLAN_AVX512_INLINE void segment_chunk(const backward_table_args<Weight>& a, Weight* row,
                                         std::uint32_t begin, std::uint32_t end, std::int64_t col,
                                         __mmask16 tail) {
  __m512 acc[NV];
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    acc[v] = _mm512_setzero_ps();
  for (std::uint32_t k = begin; k < end; ++k) {
    const lookup_info info = a.info[a.sorted_positions[k]];
    const float* g =
        a.grad_output + index::output_offset(info.sample, a.total_dim, a.d_offset) + col;
    const __m512 f = _mm512_set1_ps(info.factor);
    EMBPLAN_UNROLL_VECTORS
    for (int v = 0; v < NV; ++v)
      acc[v] = _mm512_fmadd_ps(f, load_part<NV, Masked>(g, v, tail), acc[v]);
  }
  const __m512 neg_lr = _mm512_set1_ps(-a.learning_rate);
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v) {
    const __m512 w = load_part<NV, Masked>(row + col, v, tail);
    store_part<NV, Masked>(row + col, v, _mm512_fmadd_ps(neg_lr, acc[v], w), tail);
  }
}

template <int TailNV, bool TailMasked, class Weight>
EMBPLAN_AVX512_TARGET void backward_segments(const backward_table_args<Weight>& a,
                                             std::int64_t full_chunks, __mmask16 tail) {
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
      segment_chunk<chunk_vectors, false>(a, row, begin, end, c * chunk_vectors * width, tail);
    if constexpr (TailNV > 0) {
      segment_chunk<TailNV, TailMasked>(a, row, begin, end, full_chunks * chunk_vectors * width,
                                        tail);
    }
  }
}

template <class Weight>
void backward_table(const backward_table_args<Weight>& a) {
  const column_split split = split_columns(a.dim, width, chunk_vectors);
  const auto tail = static_cast<__mmask16>((1u << split.tail_columns) - 1u);
  with_count<chunk_vectors>(split.tail_vectors, [&](auto nv) {
    with_bool(split.tail_masked,
              [&](auto masked) { backward_segments<nv(), masked()>(a, split.full_chunks, tail); });
  });
}

}  // namespace embplan::kernel::detail::avx512

#undef EMBPLAN_AVX512_INLINE
#undef EMBPLAN_AVX512_TARGET
#endif  // EMBPLAN_KERNEL_X86

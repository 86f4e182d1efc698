#pragma once
// AVX2 + FMA + F16C body of the CPU embedding bag (8 floats per vector), the
// same algorithm and per-element arithmetic as the AVX-512 one
// (detail/embedding_bag_avx512.hpp): chunks of 8 vectors (64 columns) in
// registers, then a tail chunk whose last vector is partial when the dim is
// not a multiple of 8 (masked loads for fp32; a 4-column fast case and a
// byte copy otherwise for fp16, which has no masked 16-bit load in AVX2).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "embplan/kernel/detail/cpu_features.hpp"
#include "embplan/kernel/detail/embedding_bag_common.hpp"

#if EMBPLAN_KERNEL_X86
#include <immintrin.h>

#define EMBPLAN_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#define EMBPLAN_AVX2_INLINE EMBPLAN_AVX2_TARGET __attribute__((always_inline)) inline

namespace embplan::kernel::detail::avx2 {

inline constexpr int width = 8;
inline constexpr int chunk_vectors = 8;

// The partial last vector of a row: `columns` (1-7) valid lanes.
struct tail_lanes {
  __m256i mask;
  int columns;
};

EMBPLAN_AVX2_INLINE tail_lanes make_tail(int columns) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return {_mm256_cmpgt_epi32(_mm256_set1_epi32(columns), lane), columns};
}

EMBPLAN_AVX2_INLINE __m256 load(const float* p) {
  return _mm256_loadu_ps(p);
}
EMBPLAN_AVX2_INLINE __m256 load(const half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
EMBPLAN_AVX2_INLINE __m256 load(const float* p, const tail_lanes& t) {
  return _mm256_maskload_ps(p, t.mask);
}
EMBPLAN_AVX2_INLINE __m256 load(const half* p, const tail_lanes& t) {
  if (t.columns == 4) return _mm256_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  __m128i buf = _mm_setzero_si128();
  std::memcpy(&buf, p, static_cast<std::size_t>(t.columns) * sizeof(half));
  return _mm256_cvtph_ps(buf);
}
EMBPLAN_AVX2_INLINE void store(float* p, __m256 v) {
  _mm256_storeu_ps(p, v);
}
EMBPLAN_AVX2_INLINE void store(half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
EMBPLAN_AVX2_INLINE void store(float* p, __m256 v, const tail_lanes& t) {
  _mm256_maskstore_ps(p, t.mask, v);
}
EMBPLAN_AVX2_INLINE void store(half* p, __m256 v, const tail_lanes& t) {
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (t.columns == 4) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), h);
  } else {
    std::memcpy(static_cast<void*>(p), &h, static_cast<std::size_t>(t.columns) * sizeof(half));
  }
}

// Plain loops with constant trip counts, fully unrolled: lambdas and fold
// expressions would not inherit the target attribute.
template <int NV, bool Masked, class T>
EMBPLAN_AVX2_INLINE __m256 load_part(const T* p, int v, const tail_lanes& tail) {
  return Masked && v == NV - 1 ? load(p + v * width, tail) : load(p + v * width);
}
template <int NV, bool Masked, class T>
EMBPLAN_AVX2_INLINE void store_part(T* p, int v, __m256 x, const tail_lanes& tail) {
  if (Masked && v == NV - 1) {
    store(p + v * width, x, tail);
  } else {
    store(p + v * width, x);
  }
}

template <int NV, bool Masked, bool Weighted, class Weight>
EMBPLAN_AVX2_INLINE void bag_chunk(const forward_table_args<Weight>& a, std::int64_t begin,
                                   std::int64_t end, std::int64_t col, const tail_lanes& tail,
                                   std::int64_t prefetch_end, std::int64_t distance, float scale,
                                   float* out) {
  __m256 acc[NV];
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    acc[v] = _mm256_setzero_ps();
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
      const __m256 w = _mm256_set1_ps(a.per_sample_weights[i]);
      EMBPLAN_UNROLL_VECTORS
      for (int v = 0; v < NV; ++v)
        acc[v] = _mm256_fmadd_ps(w, load_part<NV, Masked>(row, v, tail), acc[v]);
    } else {
      EMBPLAN_UNROLL_VECTORS
      for (int v = 0; v < NV; ++v)
        acc[v] = _mm256_add_ps(acc[v], load_part<NV, Masked>(row, v, tail));
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    store_part<NV, Masked>(out + col, v, _mm256_mul_ps(acc[v], s), tail);
}

template <int TailNV, bool TailMasked, bool Weighted, class Weight>
EMBPLAN_AVX2_TARGET void forward_bags(const forward_table_args<Weight>& a, std::int64_t full_chunks,
                                      int tail_columns) {
  const tail_lanes tail = make_tail(tail_columns);
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

template <class Weight>
void forward_table(const forward_table_args<Weight>& a) {
  const column_split split = split_columns(a.dim, width, chunk_vectors);
  with_count<chunk_vectors>(split.tail_vectors, [&](auto nv) {
    with_bool(split.tail_masked, [&](auto masked) {
      with_bool(a.per_sample_weights != nullptr, [&](auto weighted) {
        forward_bags<nv(), masked(), weighted()>(a, split.full_chunks, split.tail_columns);
      });
    });
  });
}

template <int NV, bool Masked, class Weight>
EMBPLAN_AVX2_INLINE void segment_chunk(const backward_table_args<Weight>& a, Weight* row,
                                       std::uint32_t begin, std::uint32_t end, std::int64_t col,
                                       const tail_lanes& tail) {
  __m256 acc[NV];
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v)
    acc[v] = _mm256_setzero_ps();
  for (std::uint32_t k = begin; k < end; ++k) {
    const lookup_info info = a.info[a.sorted_positions[k]];
    const float* g =
        a.grad_output + index::output_offset(info.sample, a.total_dim, a.d_offset) + col;
    const __m256 f = _mm256_set1_ps(info.factor);
    EMBPLAN_UNROLL_VECTORS
    for (int v = 0; v < NV; ++v)
      acc[v] = _mm256_fmadd_ps(f, load_part<NV, Masked>(g, v, tail), acc[v]);
  }
  const __m256 neg_lr = _mm256_set1_ps(-a.learning_rate);
  EMBPLAN_UNROLL_VECTORS
  for (int v = 0; v < NV; ++v) {
    const __m256 w = load_part<NV, Masked>(row + col, v, tail);
    store_part<NV, Masked>(row + col, v, _mm256_fmadd_ps(neg_lr, acc[v], w), tail);
  }
}

template <int TailNV, bool TailMasked, class Weight>
EMBPLAN_AVX2_TARGET void backward_segments(const backward_table_args<Weight>& a,
                                           std::int64_t full_chunks, int tail_columns) {
  const tail_lanes tail = make_tail(tail_columns);
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
  with_count<chunk_vectors>(split.tail_vectors, [&](auto nv) {
    with_bool(split.tail_masked, [&](auto masked) {
      backward_segments<nv(), masked()>(a, split.full_chunks, split.tail_columns);
    });
  });
}

}  // namespace embplan::kernel::detail::avx2

#undef EMBPLAN_AVX2_INLINE
#undef EMBPLAN_AVX2_TARGET
#endif  // EMBPLAN_KERNEL_X86

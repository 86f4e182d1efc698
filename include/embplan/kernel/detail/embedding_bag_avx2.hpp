#pragma once
// AVX2 + FMA + F16C body of the CPU embedding bag (8 floats per vector):
// the vector body (detail/embedding_bag_vector.hpp) over the intrinsics below,
// chunks of 8 vectors (64 columns). A partial last vector uses masked loads
// for fp32; for fp16, which has no masked 16-bit load in AVX2, a 4-column fast
// case and a byte copy otherwise. Compiled with __attribute__((target)) so the
// library needs no -march; chosen at run time by kernel/embedding_bag.hpp.
#include <cstdint>
#include <cstring>

#include "embplan/kernel/detail/cpu_features.hpp"
#include "embplan/kernel/detail/embedding_bag_common.hpp"
#include "embplan/version.hpp"

#if EMBPLAN_KERNEL_X86
#include <immintrin.h>

#define EMBPLAN_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#define EMBPLAN_AVX2_INLINE EMBPLAN_AVX2_TARGET __attribute__((always_inline)) inline

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

struct avx2_isa {
  using vec = __m256;
  static constexpr int width = 8;
  static constexpr int chunk_vectors = 8;

  // The partial last vector of a row: `columns` (1-7) valid lanes.
  struct tail {
    __m256i mask;
    int columns;
  };

  EMBPLAN_AVX2_INLINE static tail make_tail(int columns) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return {_mm256_cmpgt_epi32(_mm256_set1_epi32(columns), lane), columns};
  }

  EMBPLAN_AVX2_INLINE static vec zero() { return _mm256_setzero_ps(); }
  EMBPLAN_AVX2_INLINE static vec broadcast(float x) { return _mm256_set1_ps(x); }
  EMBPLAN_AVX2_INLINE static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  EMBPLAN_AVX2_INLINE static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  EMBPLAN_AVX2_INLINE static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }

  EMBPLAN_AVX2_INLINE static vec load(const float* p) { return _mm256_loadu_ps(p); }
  EMBPLAN_AVX2_INLINE static vec load(const half* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  EMBPLAN_AVX2_INLINE static vec load(const float* p, const tail& t) {
    return _mm256_maskload_ps(p, t.mask);
  }
  EMBPLAN_AVX2_INLINE static vec load(const half* p, const tail& t) {
    if (t.columns == 4) {
      return _mm256_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    }
    __m128i buf = _mm_setzero_si128();
    std::memcpy(&buf, p, static_cast<std::size_t>(t.columns) * sizeof(half));
    return _mm256_cvtph_ps(buf);
  }

  EMBPLAN_AVX2_INLINE static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  EMBPLAN_AVX2_INLINE static void store(half* p, vec v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow(v));
  }
  EMBPLAN_AVX2_INLINE static void store(float* p, vec v, const tail& t) {
    _mm256_maskstore_ps(p, t.mask, v);
  }
  EMBPLAN_AVX2_INLINE static void store(half* p, vec v, const tail& t) {
    const __m128i h = narrow(v);
    if (t.columns == 4) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p), h);
    } else {
      std::memcpy(static_cast<void*>(p), &h, static_cast<std::size_t>(t.columns) * sizeof(half));
    }
  }

 private:
  EMBPLAN_AVX2_INLINE static __m128i narrow(vec v) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
};
static_assert(vector_isa<avx2_isa>);

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail

#define EMBPLAN_VECTOR_NAMESPACE avx2
#define EMBPLAN_VECTOR_ISA ::embplan::kernel::detail::avx2_isa
#define EMBPLAN_VECTOR_TARGET EMBPLAN_AVX2_TARGET
#include "embplan/kernel/detail/embedding_bag_vector.hpp"

#undef EMBPLAN_AVX2_INLINE
#undef EMBPLAN_AVX2_TARGET
#endif  // EMBPLAN_KERNEL_X86

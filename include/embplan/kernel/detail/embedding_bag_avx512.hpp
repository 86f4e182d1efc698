#pragma once
// AVX-512 body of the CPU embedding bag (16 floats per vector): the vector
// body (detail/embedding_bag_vector.hpp) over the intrinsics below, chunks of
// 8 vectors (128 columns), a partial last vector masked (fp16 too, with
// AVX-512 BW's 16-bit masked loads). Compiled with __attribute__((target)) so
// the library needs no -march; chosen at run time by kernel/embedding_bag.hpp
// when the CPU has AVX-512 F/BW/VL.
#include <cstdint>

#include "embplan/kernel/detail/cpu_features.hpp"
#include "embplan/kernel/detail/embedding_bag_common.hpp"
#include "embplan/version.hpp"

#if EMBPLAN_KERNEL_X86
#include <immintrin.h>

#define EMBPLAN_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define EMBPLAN_AVX512_INLINE EMBPLAN_AVX512_TARGET __attribute__((always_inline)) inline

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

struct avx512_isa {
  using vec = __m512;
  static constexpr int width = 16;
  static constexpr int chunk_vectors = 8;

  // The partial last vector of a row: a mask of its valid lanes.
  using tail = __mmask16;

  EMBPLAN_AVX512_INLINE static tail make_tail(int columns) {
    return static_cast<__mmask16>((1u << columns) - 1u);
  }

  EMBPLAN_AVX512_INLINE static vec zero() { return _mm512_setzero_ps(); }
  EMBPLAN_AVX512_INLINE static vec broadcast(float x) { return _mm512_set1_ps(x); }
  EMBPLAN_AVX512_INLINE static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  EMBPLAN_AVX512_INLINE static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  EMBPLAN_AVX512_INLINE static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }

  EMBPLAN_AVX512_INLINE static vec load(const float* p) { return _mm512_loadu_ps(p); }
  // maskz with a full mask, not _mm512_cvtph_ps / _mm512_cvtps_ph: GCC 12 warns
  // on their _mm512_undefined_* (-Wmaybe-uninitialized, GCC bug 105593).
  EMBPLAN_AVX512_INLINE static vec load(const half* p) {
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  EMBPLAN_AVX512_INLINE static vec load(const float* p, tail m) {
    return _mm512_maskz_loadu_ps(m, p);
  }
  EMBPLAN_AVX512_INLINE static vec load(const half* p, tail m) {
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_maskz_loadu_epi16(m, p));
  }

  EMBPLAN_AVX512_INLINE static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  EMBPLAN_AVX512_INLINE static void store(half* p, vec v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow(v));
  }
  EMBPLAN_AVX512_INLINE static void store(float* p, vec v, tail m) {
    _mm512_mask_storeu_ps(p, m, v);
  }
  EMBPLAN_AVX512_INLINE static void store(half* p, vec v, tail m) {
    _mm256_mask_storeu_epi16(p, m, narrow(v));
  }

 private:
  EMBPLAN_AVX512_INLINE static __m256i narrow(vec v) {
    return _mm512_maskz_cvtps_ph(0xffff, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
};
static_assert(vector_isa<avx512_isa>);

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail

#define EMBPLAN_VECTOR_NAMESPACE avx512
#define EMBPLAN_VECTOR_ISA ::embplan::kernel::detail::avx512_isa
#define EMBPLAN_VECTOR_TARGET EMBPLAN_AVX512_TARGET
#include "embplan/kernel/detail/embedding_bag_vector.hpp"

#undef EMBPLAN_AVX512_INLINE
#undef EMBPLAN_AVX512_TARGET
#endif  // EMBPLAN_KERNEL_X86

#pragma once
// AVX-512 and AVX2+FMA kernels of nn::packed_compute_cost_net, compiled for
// their ISA with function target attributes so the library needs no -march:
// the caller picks one at run time (cpu_has_avx512 / cpu_has_avx2).
//
// Register blocking (a GEMM micro-kernel at tiny M): a block of R table rows x
// one packed_width (32-float) column block of accumulators lives in registers
// across the whole k loop; per k it costs one broadcast per row and the
// column block's weight loads. AVX-512: R <= 12 rows x 2 zmm = 24 accumulators
// of 32 registers; AVX2: R <= 6 rows x 2 ymm (half a column block at a time) =
// 12 of 16. Ten tables x (20x128 + 128x32) is ~66k FMAs, ~2k cycles at two
// 16-wide FMAs per cycle. All loads are unaligned-safe (loadu), so any
// stride and any allocation works; packed storage is cache-line aligned anyway.
// Both follow the arithmetic contract in packed_layers.hpp (the same fma
// chains and sums in the same order as scalar_ops), so every kernel gives the
// same floats, bit for bit.

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBPLAN_NN_X86_KERNELS 1

#include <immintrin.h>

#include <cstddef>

#include "embplan/nn/detail/packed_layers.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn::detail {

inline bool cpu_has_avx512() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
}

inline bool cpu_has_avx2() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
}

// max(v, 0) and the sum of the lanes, through zero-masked forms: GCC 12's
// _mm512_max_ps and _mm512_reduce_add_ps read an _mm512_undefined_*() and trip
// -Wmaybe-uninitialized (GCC bug 105593). sum512 is the lane tree of the
// kernels' contract (packed_layers.hpp): lane i + lane i^8, then i^4, i^2, i^1.
[[gnu::target("avx512f")]] inline __m512 relu512(__m512 v) {
  return _mm512_maskz_max_ps(static_cast<__mmask16>(0xFFFF), v, _mm512_setzero_ps());
}

[[gnu::target("avx512f")]] inline float sum512(__m512 v) {
  constexpr auto all = static_cast<__mmask16>(0xFFFF);
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(all, v, v, 0x4E));  // swap 256-bit halves
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(all, v, v, 0xB1));  // swap 128-bit lanes
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(all, v, 0x4E));        // swap float pairs
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(all, v, 0xB1));        // swap floats
  return _mm512_cvtss_f32(v);
}

// Eight lanes in the same tree: i + i^4, then i^2, i^1.
[[gnu::target("avx2,fma")]] inline float sum256(__m256 s) {
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 h = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}

struct avx512_ops {
  static constexpr int max_rows = 12;

  [[gnu::target("avx512f")]] static void normalize(const float* x, std::size_t x_stride,
                                                   std::size_t rows, const norm_view& nv,
                                                   float* out, std::size_t out_stride) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * x_stride;
      float* o = out + r * out_stride;
      for (std::size_t f = 0; f < nv.f; f += 16) {
        const std::size_t left = nv.f - f;
        const __mmask16 m =
            left >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(m, xr + f);
        _mm512_storeu_ps(o + f, _mm512_mul_ps(_mm512_sub_ps(v, _mm512_loadu_ps(nv.mean + f)),
                                              _mm512_loadu_ps(nv.inv_std + f)));
      }
    }
  }

  [[gnu::target("avx512f")]] static void layer(const float* in, std::size_t in_stride,
                                               std::size_t rows, const layer_view& l, float* out,
                                               std::size_t out_stride) {
    for (; rows >= max_rows; rows -= max_rows) {
      block<max_rows, false>(in, in_stride, l, out, out_stride);
      in += max_rows * in_stride;
      out += max_rows * out_stride;
    }
    tail<false>(rows, in, in_stride, l, out, out_stride);
  }

  [[gnu::target("avx512f")]] static void layer_sum(const float* in, std::size_t in_stride,
                                                   std::size_t rows, const layer_view& l,
                                                   float* sum, float* /*tmp*/) {
    for (; rows >= max_rows; rows -= max_rows) {
      block<max_rows, true>(in, in_stride, l, sum, 0);
      in += max_rows * in_stride;
    }
    tail<true>(rows, in, in_stride, l, sum, 0);
  }

  // One row: four partial sums over k per column block, so the FMA chains
  // are 8 deep rather than 32 (latency, not throughput, bounds a single row).
  [[gnu::target("avx512f")]] static void vecmat(const float* in, const layer_view& l, float* out) {
    for (std::size_t n = 0; n < l.n_pad; n += packed_width) {
      __m512 a0[4], a1[4];
      a0[0] = _mm512_loadu_ps(l.b + n);
      a1[0] = _mm512_loadu_ps(l.b + n + 16);
      for (int j = 1; j < 4; ++j)
        a0[j] = a1[j] = _mm512_setzero_ps();
      const float* w = l.w + n;
      std::size_t k = 0;
      for (; k + 4 <= l.k; k += 4) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512 x = _mm512_set1_ps(in[k + static_cast<std::size_t>(j)]);
          const float* wk = w + (k + static_cast<std::size_t>(j)) * l.n_pad;
          a0[j] = _mm512_fmadd_ps(x, _mm512_loadu_ps(wk), a0[j]);
          a1[j] = _mm512_fmadd_ps(x, _mm512_loadu_ps(wk + 16), a1[j]);
        }
      }
      for (; k < l.k; ++k) {
        const __m512 x = _mm512_set1_ps(in[k]);
        a0[0] = _mm512_fmadd_ps(x, _mm512_loadu_ps(w + k * l.n_pad), a0[0]);
        a1[0] = _mm512_fmadd_ps(x, _mm512_loadu_ps(w + k * l.n_pad + 16), a1[0]);
      }
      __m512 s0 = _mm512_add_ps(_mm512_add_ps(a0[0], a0[1]), _mm512_add_ps(a0[2], a0[3]));
      __m512 s1 = _mm512_add_ps(_mm512_add_ps(a1[0], a1[1]), _mm512_add_ps(a1[2], a1[3]));
      if (l.relu) {
        s0 = relu512(s0);
        s1 = relu512(s1);
      }
      _mm512_storeu_ps(out + n, s0);
      _mm512_storeu_ps(out + n + 16, s1);
    }
  }

  // vecmat on `rows` rows: up to vecmat_max_rows rows at a time share each
  // weight load (a one-row vecmat streams the whole layer from L2 per row:
  // 32 KiB for NeuroShard's 128 x 64, where its 512 multiply-adds take 256
  // cycles). Per row, the arithmetic is vecmat's, in its order.
  static constexpr int vecmat_max_rows = 6;

  [[gnu::target("avx512f")]] static void vecmat_rows(const float* in, std::size_t in_stride,
                                                     std::size_t rows, const layer_view& l,
                                                     float* out, std::size_t out_stride) {
    for (; rows >= vecmat_max_rows; rows -= vecmat_max_rows) {
      vecmat_block<vecmat_max_rows>(in, in_stride, l, out, out_stride);
      in += vecmat_max_rows * in_stride;
      out += vecmat_max_rows * out_stride;
    }
    vecmat_tail(rows, in, in_stride, l, out, out_stride);
  }

  [[gnu::target("avx512f")]] static float dot(const float* in, const float* w, std::size_t k_pad) {
    __m512 s = _mm512_setzero_ps();
    for (std::size_t k = 0; k < k_pad; k += 16)
      s = _mm512_fmadd_ps(_mm512_loadu_ps(in + k), _mm512_loadu_ps(w + k), s);
    return sum512(s);
  }

  // dot(max(in, 0), w): a ReLU layer's output straight into the last layer.
  [[gnu::target("avx512f")]] static float relu_dot(const float* in, const float* w,
                                                   std::size_t k_pad) {
    __m512 s = _mm512_setzero_ps();
    for (std::size_t k = 0; k < k_pad; k += 16)
      s = _mm512_fmadd_ps(relu512(_mm512_loadu_ps(in + k)), _mm512_loadu_ps(w + k), s);
    return sum512(s);
  }

  // acc[0..n) += x[0..n), n a multiple of 16.
  [[gnu::target("avx512f")]] static void add(float* acc, const float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; i += 16)
      _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), _mm512_loadu_ps(x + i)));
  }

  // out = a + x, then relu_dot(out, w, k_pad), the sums kept in registers for
  // the dot (no store-to-load wait on the fold's critical path).
  [[gnu::target("avx512f")]] static float add_relu_dot(float* out, const float* a, const float* x,
                                                       const float* w, std::size_t k_pad) {
    __m512 s = _mm512_setzero_ps();
    for (std::size_t k = 0; k < k_pad; k += 16) {
      const __m512 z = _mm512_add_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(x + k));
      _mm512_storeu_ps(out + k, z);
      s = _mm512_fmadd_ps(relu512(z), _mm512_loadu_ps(w + k), s);
    }
    return sum512(s);
  }

 private:
  // R rows x every column block. Sum: add the rows' activations into
  // out[0..n_pad) instead of storing them.
  template <int R, bool Sum>
  [[gnu::target("avx512f")]] static void block(const float* in, std::size_t in_stride,
                                               const layer_view& l, float* out,
                                               std::size_t out_stride) {
    for (std::size_t n = 0; n < l.n_pad; n += packed_width) {
      __m512 acc0[R], acc1[R];
      const __m512 b0 = _mm512_loadu_ps(l.b + n);
      const __m512 b1 = _mm512_loadu_ps(l.b + n + 16);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        acc0[r] = b0;
        acc1[r] = b1;
      }
      const float* w = l.w + n;
      for (std::size_t k = 0; k < l.k; ++k, w += l.n_pad) {
        const __m512 w0 = _mm512_loadu_ps(w);
        const __m512 w1 = _mm512_loadu_ps(w + 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512 x = _mm512_set1_ps(in[static_cast<std::size_t>(r) * in_stride + k]);
          acc0[r] = _mm512_fmadd_ps(x, w0, acc0[r]);
          acc1[r] = _mm512_fmadd_ps(x, w1, acc1[r]);
        }
      }
      if (l.relu) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          acc0[r] = relu512(acc0[r]);
          acc1[r] = relu512(acc1[r]);
        }
      }
      if constexpr (Sum) {
        __m512 s0 = _mm512_loadu_ps(out + n);
        __m512 s1 = _mm512_loadu_ps(out + n + 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          s0 = _mm512_add_ps(s0, acc0[r]);
          s1 = _mm512_add_ps(s1, acc1[r]);
        }
        _mm512_storeu_ps(out + n, s0);
        _mm512_storeu_ps(out + n + 16, s1);
      } else {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          float* o = out + static_cast<std::size_t>(r) * out_stride + n;
          _mm512_storeu_ps(o, acc0[r]);
          _mm512_storeu_ps(o + 16, acc1[r]);
        }
      }
    }
  }

  // R rows x 16 columns at a time, four partial sums per row (vecmat's).
  template <int R>
  [[gnu::target("avx512f")]] static void vecmat_block(const float* in, std::size_t in_stride,
                                                      const layer_view& l, float* out,
                                                      std::size_t out_stride) {
    const std::size_t k4 = l.k / 4 * 4;
    for (std::size_t n = 0; n < l.n_pad; n += 16) {
      __m512 p[R][4];
      const __m512 b = _mm512_loadu_ps(l.b + n);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        p[r][0] = b;
        p[r][1] = p[r][2] = p[r][3] = _mm512_setzero_ps();
      }
      const float* w = l.w + n;
      std::size_t k = 0;
      for (; k < k4; k += 4) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const std::size_t kj = k + static_cast<std::size_t>(j);
          const __m512 wk = _mm512_loadu_ps(w + kj * l.n_pad);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const __m512 x = _mm512_set1_ps(in[static_cast<std::size_t>(r) * in_stride + kj]);
            p[r][j] = _mm512_fmadd_ps(x, wk, p[r][j]);
          }
        }
      }
      for (; k < l.k; ++k) {
        const __m512 wk = _mm512_loadu_ps(w + k * l.n_pad);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512 x = _mm512_set1_ps(in[static_cast<std::size_t>(r) * in_stride + k]);
          p[r][0] = _mm512_fmadd_ps(x, wk, p[r][0]);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512 y = _mm512_add_ps(_mm512_add_ps(p[r][0], p[r][1]), _mm512_add_ps(p[r][2], p[r][3]));
        if (l.relu) y = relu512(y);
        _mm512_storeu_ps(out + static_cast<std::size_t>(r) * out_stride + n, y);
      }
    }
  }

  template <int R = vecmat_max_rows - 1>
  [[gnu::target("avx512f")]] static void vecmat_tail(std::size_t rows, const float* in,
                                                     std::size_t in_stride, const layer_view& l,
                                                     float* out, std::size_t out_stride) {
    if constexpr (R > 0) {
      if (rows == static_cast<std::size_t>(R)) {
        vecmat_block<R>(in, in_stride, l, out, out_stride);
      } else {
        vecmat_tail<R - 1>(rows, in, in_stride, l, out, out_stride);
      }
    }
  }

  // rows < max_rows: the block instantiated for exactly that many rows.
  template <bool Sum, int R = max_rows - 1>
  [[gnu::target("avx512f")]] static void tail(std::size_t rows, const float* in,
                                              std::size_t in_stride, const layer_view& l,
                                              float* out, std::size_t out_stride) {
    if constexpr (R > 0) {
      if (rows == static_cast<std::size_t>(R)) {
        block<R, Sum>(in, in_stride, l, out, out_stride);
      } else {
        tail<Sum, R - 1>(rows, in, in_stride, l, out, out_stride);
      }
    }
  }
};

struct avx2_ops {
  static constexpr int max_rows = 6;

  [[gnu::target("avx2,fma")]] static void normalize(const float* x, std::size_t x_stride,
                                                    std::size_t rows, const norm_view& nv,
                                                    float* out, std::size_t out_stride) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * x_stride;
      float* o = out + r * out_stride;
      std::size_t f = 0;
      for (; f + 8 <= nv.f; f += 8) {
        _mm256_storeu_ps(o + f, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + f),
                                                            _mm256_loadu_ps(nv.mean + f)),
                                              _mm256_loadu_ps(nv.inv_std + f)));
      }
      for (; f < nv.f; ++f)
        o[f] = (xr[f] - nv.mean[f]) * nv.inv_std[f];
    }
  }

  [[gnu::target("avx2,fma")]] static void layer(const float* in, std::size_t in_stride,
                                                std::size_t rows, const layer_view& l, float* out,
                                                std::size_t out_stride) {
    for (; rows >= max_rows; rows -= max_rows) {
      block<max_rows, false>(in, in_stride, l, out, out_stride);
      in += max_rows * in_stride;
      out += max_rows * out_stride;
    }
    tail<false>(rows, in, in_stride, l, out, out_stride);
  }

  [[gnu::target("avx2,fma")]] static void layer_sum(const float* in, std::size_t in_stride,
                                                    std::size_t rows, const layer_view& l,
                                                    float* sum, float* /*tmp*/) {
    for (; rows >= max_rows; rows -= max_rows) {
      block<max_rows, true>(in, in_stride, l, sum, 0);
      in += max_rows * in_stride;
    }
    tail<true>(rows, in, in_stride, l, sum, 0);
  }

  [[gnu::target("avx2,fma")]] static void vecmat(const float* in, const layer_view& l, float* out) {
    for (std::size_t n = 0; n < l.n_pad; n += 16) {
      __m256 a0[4], a1[4];
      a0[0] = _mm256_loadu_ps(l.b + n);
      a1[0] = _mm256_loadu_ps(l.b + n + 8);
      for (int j = 1; j < 4; ++j)
        a0[j] = a1[j] = _mm256_setzero_ps();
      const float* w = l.w + n;
      std::size_t k = 0;
      for (; k + 4 <= l.k; k += 4) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m256 x = _mm256_set1_ps(in[k + static_cast<std::size_t>(j)]);
          const float* wk = w + (k + static_cast<std::size_t>(j)) * l.n_pad;
          a0[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wk), a0[j]);
          a1[j] = _mm256_fmadd_ps(x, _mm256_loadu_ps(wk + 8), a1[j]);
        }
      }
      for (; k < l.k; ++k) {
        const __m256 x = _mm256_set1_ps(in[k]);
        a0[0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w + k * l.n_pad), a0[0]);
        a1[0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w + k * l.n_pad + 8), a1[0]);
      }
      __m256 s0 = _mm256_add_ps(_mm256_add_ps(a0[0], a0[1]), _mm256_add_ps(a0[2], a0[3]));
      __m256 s1 = _mm256_add_ps(_mm256_add_ps(a1[0], a1[1]), _mm256_add_ps(a1[2], a1[3]));
      if (l.relu) {
        s0 = _mm256_max_ps(s0, _mm256_setzero_ps());
        s1 = _mm256_max_ps(s1, _mm256_setzero_ps());
      }
      _mm256_storeu_ps(out + n, s0);
      _mm256_storeu_ps(out + n + 8, s1);
    }
  }

  // vecmat on `rows` rows, up to vecmat_max_rows sharing each weight load;
  // per row, vecmat's arithmetic in its order (avx512_ops::vecmat_rows).
  static constexpr int vecmat_max_rows = 3;

  [[gnu::target("avx2,fma")]] static void vecmat_rows(const float* in, std::size_t in_stride,
                                                      std::size_t rows, const layer_view& l,
                                                      float* out, std::size_t out_stride) {
    for (; rows >= vecmat_max_rows; rows -= vecmat_max_rows) {
      vecmat_block<vecmat_max_rows>(in, in_stride, l, out, out_stride);
      in += vecmat_max_rows * in_stride;
      out += vecmat_max_rows * out_stride;
    }
    if (rows == 2) vecmat_block<2>(in, in_stride, l, out, out_stride);
    if (rows == 1) vecmat_block<1>(in, in_stride, l, out, out_stride);
  }

  // The sixteen lanes of the contract (packed_layers.hpp) in two registers,
  // lanes 0-7 and 8-15; lo + hi is the tree's first level, sum256 the rest.
  [[gnu::target("avx2,fma")]] static float dot(const float* in, const float* w, std::size_t k_pad) {
    __m256 lo = _mm256_setzero_ps();
    __m256 hi = _mm256_setzero_ps();
    for (std::size_t k = 0; k < k_pad; k += 16) {
      lo = _mm256_fmadd_ps(_mm256_loadu_ps(in + k), _mm256_loadu_ps(w + k), lo);
      hi = _mm256_fmadd_ps(_mm256_loadu_ps(in + k + 8), _mm256_loadu_ps(w + k + 8), hi);
    }
    return sum256(_mm256_add_ps(lo, hi));
  }

  // dot(max(in, 0), w): a ReLU layer's output straight into the last layer.
  [[gnu::target("avx2,fma")]] static float relu_dot(const float* in, const float* w,
                                                    std::size_t k_pad) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 lo = _mm256_setzero_ps();
    __m256 hi = _mm256_setzero_ps();
    for (std::size_t k = 0; k < k_pad; k += 16) {
      lo =
          _mm256_fmadd_ps(_mm256_max_ps(_mm256_loadu_ps(in + k), zero), _mm256_loadu_ps(w + k), lo);
      hi = _mm256_fmadd_ps(_mm256_max_ps(_mm256_loadu_ps(in + k + 8), zero),
                           _mm256_loadu_ps(w + k + 8), hi);
    }
    return sum256(_mm256_add_ps(lo, hi));
  }

  // acc[0..n) += x[0..n), n a multiple of 8.
  [[gnu::target("avx2,fma")]] static void add(float* acc, const float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(x + i)));
  }

  // out = a + x, then relu_dot(out, w, k_pad), the sums kept in registers.
  [[gnu::target("avx2,fma")]] static float add_relu_dot(float* out, const float* a, const float* x,
                                                        const float* w, std::size_t k_pad) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 lo = _mm256_setzero_ps();
    __m256 hi = _mm256_setzero_ps();
    for (std::size_t k = 0; k < k_pad; k += 16) {
      const __m256 zl = _mm256_add_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(x + k));
      const __m256 zh = _mm256_add_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(x + k + 8));
      _mm256_storeu_ps(out + k, zl);
      _mm256_storeu_ps(out + k + 8, zh);
      lo = _mm256_fmadd_ps(_mm256_max_ps(zl, zero), _mm256_loadu_ps(w + k), lo);
      hi = _mm256_fmadd_ps(_mm256_max_ps(zh, zero), _mm256_loadu_ps(w + k + 8), hi);
    }
    return sum256(_mm256_add_ps(lo, hi));
  }

 private:
  // R rows x 8 columns at a time, four partial sums per row (vecmat's):
  // 4 R accumulators of 16 registers.
  template <int R>
  [[gnu::target("avx2,fma")]] static void vecmat_block(const float* in, std::size_t in_stride,
                                                       const layer_view& l, float* out,
                                                       std::size_t out_stride) {
    const std::size_t k4 = l.k / 4 * 4;
    for (std::size_t n = 0; n < l.n_pad; n += 8) {
      __m256 p[R][4];
      const __m256 b = _mm256_loadu_ps(l.b + n);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        p[r][0] = b;
        p[r][1] = p[r][2] = p[r][3] = _mm256_setzero_ps();
      }
      const float* w = l.w + n;
      std::size_t k = 0;
      for (; k < k4; k += 4) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const std::size_t kj = k + static_cast<std::size_t>(j);
          const __m256 wk = _mm256_loadu_ps(w + kj * l.n_pad);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const __m256 x = _mm256_broadcast_ss(in + static_cast<std::size_t>(r) * in_stride + kj);
            p[r][j] = _mm256_fmadd_ps(x, wk, p[r][j]);
          }
        }
      }
      for (; k < l.k; ++k) {
        const __m256 wk = _mm256_loadu_ps(w + k * l.n_pad);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 x = _mm256_broadcast_ss(in + static_cast<std::size_t>(r) * in_stride + k);
          p[r][0] = _mm256_fmadd_ps(x, wk, p[r][0]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256 y = _mm256_add_ps(_mm256_add_ps(p[r][0], p[r][1]), _mm256_add_ps(p[r][2], p[r][3]));
        if (l.relu) y = _mm256_max_ps(y, _mm256_setzero_ps());
        _mm256_storeu_ps(out + static_cast<std::size_t>(r) * out_stride + n, y);
      }
    }
  }

  // R rows x half a column block (16 floats, 2 ymm) at a time.
  template <int R, bool Sum>
  [[gnu::target("avx2,fma")]] static void block(const float* in, std::size_t in_stride,
                                                const layer_view& l, float* out,
                                                std::size_t out_stride) {
    for (std::size_t n = 0; n < l.n_pad; n += 16) {
      __m256 acc0[R], acc1[R];
      const __m256 b0 = _mm256_loadu_ps(l.b + n);
      const __m256 b1 = _mm256_loadu_ps(l.b + n + 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc0[r] = b0;
        acc1[r] = b1;
      }
      const float* w = l.w + n;
      for (std::size_t k = 0; k < l.k; ++k, w += l.n_pad) {
        const __m256 w0 = _mm256_loadu_ps(w);
        const __m256 w1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 x = _mm256_broadcast_ss(in + static_cast<std::size_t>(r) * in_stride + k);
          acc0[r] = _mm256_fmadd_ps(x, w0, acc0[r]);
          acc1[r] = _mm256_fmadd_ps(x, w1, acc1[r]);
        }
      }
      if (l.relu) {
        const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          acc0[r] = _mm256_max_ps(acc0[r], zero);
          acc1[r] = _mm256_max_ps(acc1[r], zero);
        }
      }
      if constexpr (Sum) {
        __m256 s0 = _mm256_loadu_ps(out + n);
        __m256 s1 = _mm256_loadu_ps(out + n + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          s0 = _mm256_add_ps(s0, acc0[r]);
          s1 = _mm256_add_ps(s1, acc1[r]);
        }
        _mm256_storeu_ps(out + n, s0);
        _mm256_storeu_ps(out + n + 8, s1);
      } else {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          float* o = out + static_cast<std::size_t>(r) * out_stride + n;
          _mm256_storeu_ps(o, acc0[r]);
          _mm256_storeu_ps(o + 8, acc1[r]);
        }
      }
    }
  }

  template <bool Sum, int R = max_rows - 1>
  [[gnu::target("avx2,fma")]] static void tail(std::size_t rows, const float* in,
                                               std::size_t in_stride, const layer_view& l,
                                               float* out, std::size_t out_stride) {
    if constexpr (R > 0) {
      if (rows == static_cast<std::size_t>(R)) {
        block<R, Sum>(in, in_stride, l, out, out_stride);
      } else {
        tail<Sum, R - 1>(rows, in, in_stride, l, out, out_stride);
      }
    }
  }
};

}  // namespace embplan::inline EMBPLAN_ABI::nn::detail

#endif

#pragma once
// Storage and portable kernels of nn::packed_compute_cost_net.
//
// Layout: every hidden layer's weight is stored transposed, [in][out_pad]
// (out padded with zeros to a multiple of packed_width floats), so a kernel
// walks the inputs k = 0..in-1 and, for each, adds x[k] * W[k][n..n+block) to
// a block of output accumulators held in vector registers. Padded outputs
// have zero weight and bias, so they stay 0 after ReLU and a following layer
// can read them (or skip them: its in-count is the unpadded size).
//
// Invariant: every kernel (scalar_ops here, avx2_ops and avx512_ops in
// packed_kernels_x86.hpp) performs the same float operations in the same
// order — normalize, layer, layer_sum, vecmat, vecmat_rows, dot and relu each
// by a fixed contract — so all give the same results bit for bit and a plan
// does not depend on the kernel picked at run time (same seed, same plan, on
// every machine; docs/design.md). Multiply-adds are fused everywhere (the
// SIMD kernels' FMA instructions, the scalar kernel's fma_exact below), never
// `a * b + c`, whose contraction would be the compiler's choice. The
// guarantee assumes IEEE float arithmetic in the default environment:
// -ffast-math (or -fassociative-math, flush-to-zero) voids it.
// The contract, operation by operation: docs/design/packed-kernels.md.

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn::detail {

// Floats per output block: two AVX-512 vectors, four AVX2 vectors.
inline constexpr std::size_t packed_width = 32;

constexpr std::size_t round_up(std::size_t n, std::size_t multiple) noexcept {
  return (n + multiple - 1) / multiple * multiple;
}

// A std::allocator that aligns to a cache line, so a packed weight row starts
// on one and an aligned-access kernel never splits a line.
template <class T>
struct cache_aligned_allocator {
  using value_type = T;
  static constexpr std::align_val_t alignment{64};

  cache_aligned_allocator() = default;
  template <class U>
  cache_aligned_allocator(const cache_aligned_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), alignment)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, alignment); }

  template <class U>
  bool operator==(const cache_aligned_allocator<U>&) const noexcept {
    return true;
  }
};

using packed_storage = std::vector<float, cache_aligned_allocator<float>>;

// n floats of scratch: on the stack up to N, on the heap past that (layers
// wider than NeuroShard's). Not copyable: data() may point into the object.
template <std::size_t N>
class scratch_floats {
 public:
  explicit scratch_floats(std::size_t n) {
    if (n > N) {
      heap_.resize(n);
      data_ = heap_.data();
    }
  }
  scratch_floats(const scratch_floats&) = delete;
  scratch_floats& operator=(const scratch_floats&) = delete;
  float* data() noexcept { return data_; }

 private:
  alignas(64) float stack_[N];
  std::vector<float> heap_;
  float* data_ = stack_;
};

// One hidden layer as a kernel sees it: out[n] = act(b[n] + sum_k in[k] w[k][n]).
struct layer_view {
  const float* w;     // [k][n_pad]
  const float* b;     // [n_pad]
  std::size_t k;      // inputs read (the unpadded in_features)
  std::size_t n_pad;  // a multiple of packed_width
  bool relu;
};

// x' = (x - mean) * inv_std over f features (inv_std = 1 / std, or 1 where
// std == 0, as normalizer does); mean and inv_std are padded with zeros to a
// multiple of 16.
struct norm_view {
  const float* mean;
  const float* inv_std;
  std::size_t f;
};

// x86's max(x, 0) (maxps returns its second operand unless x > 0), so that
// -0 and NaN give +0 in every kernel.
inline float packed_relu(float x) noexcept {
  return x > 0.0f ? x : 0.0f;
}

// Lanes of the dot products' partial sums (the AVX-512 register's width; the
// AVX2 kernel keeps them in two registers).
inline constexpr std::size_t dot_lanes = 16;

// The sum of sixteen lanes in the fixed tree of the contract above.
inline float lane_tree_sum(float (&s)[dot_lanes]) noexcept {
  for (std::size_t half = dot_lanes / 2; half > 0; half /= 2) {
    for (std::size_t i = 0; i < half; ++i)
      s[i] = s[i] + s[i + half];
  }
  return s[0];
}

// a * b + c rounded once, as std::fma, in double arithmetic: the product of
// two floats is exact in a double (24 + 24 significant bits <= 53); the sum
// is rounded to odd (round to nearest, then, when TwoSum's error says it was
// inexact and the result is even, its neighbour toward the exact sum), and a
// double rounded to odd then rounds to the correctly rounded float, since
// 53 >= 24 + 2 (Boldo & Melquiond, "Emulation of FMA and correctly rounded
// sums: proved algorithms using rounding to odd", IEEE Trans. Comput. 57(4),
// 2008). As fast as glibc's fmaf where both run
// (docs/design/packed-kernels.md), and meant for CPUs without an FMA unit,
// where glibc's fmaf switches the rounding mode on every call.
// Infinities and NaN pass through the plain sum (a NaN's payload may differ
// from std::fma's).
inline float fma_round_to_odd(float a, float b, float c) noexcept {
  const double p = static_cast<double>(a) * static_cast<double>(b);
  const double cd = c;
  const double s = p + cd;
  const double p_part = s - cd;  // TwoSum (Knuth): s + e == p + cd exactly
  const double c_part = s - p_part;
  const double e = (p - p_part) + (cd - c_part);
  constexpr std::uint64_t exponent = 0x7FF0000000000000u;
  auto bits = std::bit_cast<std::uint64_t>(s);
  const bool adjust = e != 0.0 && (bits & 1u) == 0u && (bits & exponent) != exponent;
  const bool away_from_zero = (e > 0.0) == (s > 0.0);
  bits += adjust ? (away_from_zero ? std::uint64_t{1} : ~std::uint64_t{0}) : std::uint64_t{0};
  return static_cast<float>(std::bit_cast<double>(bits));
}

// The scalar kernel's multiply-add: the FMA instruction where the target has
// one (FP_FAST_FMAF: AArch64, an x86 build with -mfma), else the emulation
// above; both are std::fma's value. The emulation needs double arithmetic
// without excess precision (FLT_EVAL_METHOD 0; not x87).
inline float fma_exact(float a, float b, float c) noexcept {
#if defined(FP_FAST_FMAF) || !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
  return std::fma(a, b, c);
#else
  return fma_round_to_odd(a, b, c);
#endif
}

// The portable kernels: plain loops in the order of the contract above, with
// fma_exact for every multiply-add.
struct scalar_ops {
  static void normalize(const float* x, std::size_t x_stride, std::size_t rows, const norm_view& nv,
                        float* out, std::size_t out_stride) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * x_stride;
      float* o = out + r * out_stride;
      for (std::size_t f = 0; f < nv.f; ++f) {
        const float centred = xr[f] - nv.mean[f];
        o[f] = centred * nv.inv_std[f];
      }
    }
  }

  // out[r] = act(in[r] W + b) for `rows` rows.
  static void layer(const float* in, std::size_t in_stride, std::size_t rows, const layer_view& l,
                    float* out, std::size_t out_stride) {
    for (std::size_t r = 0; r < rows; ++r)
      row(in + r * in_stride, l, out + r * out_stride);
  }

  // sum += sum_r act(in[r] W + b): the last table layer fused with the
  // per-device sum (NeuroShard's index_add_ over the device's tables).
  static void layer_sum(const float* in, std::size_t in_stride, std::size_t rows,
                        const layer_view& l, float* sum, float* tmp) {
    for (std::size_t r = 0; r < rows; ++r) {
      row(in + r * in_stride, l, tmp);
      for (std::size_t n = 0; n < l.n_pad; ++n)
        sum[n] = sum[n] + tmp[n];
    }
  }

  // One row through a head layer: four partial sums over k (the SIMD
  // kernels' latency split, emulated).
  static void vecmat(const float* in, const layer_view& l, float* out) {
    const std::size_t k4 = l.k / 4 * 4;
    for (std::size_t n = 0; n < l.n_pad; ++n) {
      float p[4] = {l.b[n], 0.0f, 0.0f, 0.0f};
      const float* w = l.w + n;
      for (std::size_t k = 0; k < k4; ++k)
        p[k % 4] = fma_exact(in[k], w[k * l.n_pad], p[k % 4]);
      for (std::size_t k = k4; k < l.k; ++k)
        p[0] = fma_exact(in[k], w[k * l.n_pad], p[0]);
      const float y = (p[0] + p[1]) + (p[2] + p[3]);
      out[n] = l.relu ? packed_relu(y) : y;
    }
  }

  // vecmat on `rows` rows, in[r * in_stride ..] -> out[r * out_stride ..].
  static void vecmat_rows(const float* in, std::size_t in_stride, std::size_t rows,
                          const layer_view& l, float* out, std::size_t out_stride) {
    for (std::size_t r = 0; r < rows; ++r)
      vecmat(in + r * in_stride, l, out + r * out_stride);
  }

  static float dot(const float* in, const float* w, std::size_t k_pad) {
    float s[dot_lanes] = {};
    for (std::size_t k = 0; k < k_pad; k += dot_lanes) {
      for (std::size_t j = 0; j < dot_lanes; ++j)
        s[j] = fma_exact(in[k + j], w[k + j], s[j]);
    }
    return lane_tree_sum(s);
  }

  // dot(relu(in), w): a ReLU layer's output straight into the last layer.
  static float relu_dot(const float* in, const float* w, std::size_t k_pad) {
    float s[dot_lanes] = {};
    for (std::size_t k = 0; k < k_pad; k += dot_lanes) {
      for (std::size_t j = 0; j < dot_lanes; ++j)
        s[j] = fma_exact(packed_relu(in[k + j]), w[k + j], s[j]);
    }
    return lane_tree_sum(s);
  }

  // acc[0..n) += x[0..n).
  static void add(float* acc, const float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      acc[i] = acc[i] + x[i];
  }

  // out[0..k_pad) = a + x, then relu_dot(out, w, k_pad): add() and relu_dot()
  // in one pass (out may be a).
  static float add_relu_dot(float* out, const float* a, const float* x, const float* w,
                            std::size_t k_pad) {
    for (std::size_t i = 0; i < k_pad; ++i)
      out[i] = a[i] + x[i];
    return relu_dot(out, w, k_pad);
  }

 private:
  // One packed_width block of outputs at a time in a local array the
  // compiler keeps in registers and vectorises (no aliasing with out or w).
  static void row(const float* in, const layer_view& l, float* out) {
    for (std::size_t n = 0; n < l.n_pad; n += packed_width) {
      float acc[packed_width];
      for (std::size_t j = 0; j < packed_width; ++j)
        acc[j] = l.b[n + j];
      const float* w = l.w + n;
      for (std::size_t k = 0; k < l.k; ++k, w += l.n_pad) {
        const float x = in[k];
        for (std::size_t j = 0; j < packed_width; ++j)
          acc[j] = fma_exact(x, w[j], acc[j]);
      }
      for (std::size_t j = 0; j < packed_width; ++j)
        out[n + j] = l.relu ? packed_relu(acc[j]) : acc[j];
    }
  }
};

}  // namespace embplan::inline EMBPLAN_ABI::nn::detail

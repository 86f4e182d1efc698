#pragma once
// Storage and portable kernels of nn::packed_compute_cost_net.
//
// Layout: every hidden layer's weight is stored transposed, [in][out_pad]
// (out padded with zeros to a multiple of packed_width floats), so a kernel
// walks the inputs k = 0..in-1 and, for each, adds x[k] * W[k][n..n+block) to
// a block of output accumulators held in vector registers: a broadcast and a
// few contiguous loads per k, no horizontal sums. Padded outputs have zero
// weight and bias, so they stay 0 after ReLU and a following layer can read
// them (or skip them: its in-count is the unpadded size).

#include <algorithm>
#include <cstddef>
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

// The portable kernels: plain loops the compiler vectorises for the baseline
// ISA. Same results as the SIMD kernels up to summation order.
struct scalar_ops {
  static void normalize(const float* x, std::size_t x_stride, std::size_t rows, const norm_view& nv,
                        float* out, std::size_t out_stride) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * x_stride;
      float* o = out + r * out_stride;
      for (std::size_t f = 0; f < nv.f; ++f)
        o[f] = (xr[f] - nv.mean[f]) * nv.inv_std[f];
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
        sum[n] += tmp[n];
    }
  }

  static void vecmat(const float* in, const layer_view& l, float* out) { row(in, l, out); }

  static float dot(const float* in, const float* w, std::size_t k_pad) {
    float s = 0.0f;
    for (std::size_t k = 0; k < k_pad; ++k)
      s += in[k] * w[k];
    return s;
  }

  // dot(max(in, 0), w): a ReLU layer's output straight into the last layer.
  static float relu_dot(const float* in, const float* w, std::size_t k_pad) {
    float s = 0.0f;
    for (std::size_t k = 0; k < k_pad; ++k)
      s += std::max(in[k], 0.0f) * w[k];
    return s;
  }

  // acc[0..n) += x[0..n).
  static void add(float* acc, const float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      acc[i] += x[i];
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
          acc[j] += x * w[j];
      }
      for (std::size_t j = 0; j < packed_width; ++j)
        out[n + j] = l.relu ? std::max(acc[j], 0.0f) : acc[j];
    }
  }
};

}  // namespace embplan::inline EMBPLAN_ABI::nn::detail

#pragma once
// An inference snapshot of NeuroShard's compute-cost network (compute_cost_net,
// MLSys'23 §3.2, Fig. 5 left) for the planner's inner loop, which prices one
// device at a time (NeuroShard Alg. 2 calls the model for every candidate
// placement). compute_cost_net runs on Eigen's general GEMM, whose blocking is
// made for large matrices: at 10 tables it spends most of its time in packing
// and dispatch. This snapshot copies the weights once into the layout of a
// hand-written micro-kernel (transposed, zero-padded to 32 floats, cache-line
// aligned; detail/packed_layers.hpp), applies the head's first (linear) layer
// to each table's latent and fuses the per-device sum into that step (see
// term()), and runs AVX-512 or AVX2+FMA code chosen at run time, so the
// default build (no -march) gets the wide kernels too (docs/design/packed-kernels.md).
//
// Immutable after construction: operator() is const, allocates nothing for
// layers up to a few hundred wide (its scratch is on the stack) and may be
// called from many threads. Results equal compute_cost_net's up to float
// rounding (the normaliser multiplies by 1/std instead of dividing, the
// multiply-adds are fused, and the head's first layer sums per-table
// products: W1 l_0 + W1 l_1 + ... rather than W1 (l_0 + l_1 + ...)).
//
// Every kernel gives the same floats, bit for bit (same seed, same plan, on
// every machine): scalar, AVX2 and AVX-512 perform the same fused
// multiply-adds and sums in the same order (the contract in
// detail/packed_layers.hpp), so a plan priced with this net does not depend
// on the kernel the CPU gets. The kernel changes
// speed only; `kernel` exists so that tests and benchmarks can run each.

#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/detail/packed_kernels_x86.hpp"
#include "embplan/nn/detail/packed_layers.hpp"
#include "embplan/nn/detail/packed_mlp.hpp"
#include "embplan/nn/simd_kernel.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

class packed_compute_cost_net {
 public:
  // Copies and repacks net's weights and normaliser; later changes to net do
  // not reach the snapshot. kernel: the path to run; one this CPU (or this
  // compiler) cannot run throws, naming it.
  explicit packed_compute_cost_net(const compute_cost_net& net,
                                   simd_kernel kernel = simd_kernel::automatic)
      : kernel_(detail::resolve_simd_kernel(kernel, simd_kernel_supported(simd_kernel::avx2),
                                            simd_kernel_supported(simd_kernel::avx512))) {
    validate(net);
    pack(net);
  }

  // One device: raw features [tables, F] of its tables -> predicted cost, as
  // compute_cost_net::operator() (an empty device costs the head at a zero sum).
  float operator()(const Eigen::Ref<const matrix>& features) const {
    detail::require_cols(features, table_features(), "packed_compute_cost_net.features",
                         "the network's table feature count");
    const auto rows = static_cast<std::size_t>(features.rows());
    const auto stride = static_cast<std::size_t>(features.outerStride());
    detail::scratch_floats<stack_floats> buf(scratch_floats_);
    float* scratch = buf.data();
    switch (kernel_) {
#ifdef EMBPLAN_NN_X86_KERNELS
      case simd_kernel::avx512:
        return run<detail::avx512_ops>(features.data(), stride, rows, scratch);
      case simd_kernel::avx2:
        return run<detail::avx2_ops>(features.data(), stride, rows, scratch);
#endif
      default:
        return run<detail::scalar_ops>(features.data(), stride, rows, scratch);
    }
  }

  // The two stages of operator(), for a caller that folds a device's tables
  // one at a time (the planners' piecewise pricing, search/detail/piecewise.hpp).
  // The head's first layer is linear in the sum of the table latents, so
  // W1 (l_0 + l_1 + ...) + b1 = b1 + W1 l_0 + W1 l_1 + ...: a table's *term*
  // is its latent through W1 (no bias), and a device's pre-activation is the
  // sum of its tables' terms. A planner that adds one table to a device then
  // pays one vector add and the rest of the head (a ReLU and a 64-float dot
  // for NeuroShard's 32-64-1), not the 32x64 layer. operator() computes the
  // same sum the same way, so
  //   operator()(x) == finish(z), z = start + term(x_0) + term(x_1) + ... in
  // float, element by element, row by row in order, bitwise: a row's term is
  // computed by the same kernel and the same sequence of operations whatever
  // rows surround it (each row of a register block has its own accumulators),
  // and operator() adds the rows' terms into z one row at a time, in row order.
  // term: one row of raw features (table_features() floats) -> term_size()
  // floats (zero past the first head layer's width).
  void term(const float* features, float* out) const {
    detail::scratch_floats<small_floats> scratch(2 * width_);
    float* buf = scratch.data();
    switch (kernel_) {
#ifdef EMBPLAN_NN_X86_KERNELS
      case simd_kernel::avx512:
        return term_of<detail::avx512_ops>(features, buf, out);
      case simd_kernel::avx2:
        return term_of<detail::avx2_ops>(features, buf, out);
#endif
      default:
        return term_of<detail::scalar_ops>(features, buf, out);
    }
  }

  // The fold's start: the first head layer's bias (term_size() floats).
  void start(float* z) const {
    std::copy_n(data_.data() + first_.b, first_.n_pad, z);
  }

  // z (term_size() floats, the sum above) -> the predicted cost.
  float finish(const float* z) const {
    switch (kernel_) {
#ifdef EMBPLAN_NN_X86_KERNELS
      case simd_kernel::avx512:
        return finish_of<detail::avx512_ops>(z);
      case simd_kernel::avx2:
        return finish_of<detail::avx2_ops>(z);
#endif
      default:
        return finish_of<detail::scalar_ops>(z);
    }
  }

  // z += term (term_size() floats each): the fold's step, on this net's kernel
  // (an element-wise float add, so every kernel gives the same sums).
  void add(float* z, const float* term) const {
    switch (kernel_) {
#ifdef EMBPLAN_NN_X86_KERNELS
      case simd_kernel::avx512:
        return detail::avx512_ops::add(z, term, first_.n_pad);
      case simd_kernel::avx2:
        return detail::avx2_ops::add(z, term, first_.n_pad);
#endif
      default:
        return detail::scalar_ops::add(z, term, first_.n_pad);
    }
  }

  // out = z + term (term_size() floats each; out may be z), then finish(out):
  // bitwise add() and finish() on out. Where the head is a ReLU layer straight
  // into the last (NeuroShard's), one pass: the sums go to the dot from
  // registers, not through memory.
  float add_finish(float* out, const float* z, const float* term) const {
    switch (kernel_) {
#ifdef EMBPLAN_NN_X86_KERNELS
      case simd_kernel::avx512:
        return add_finish_of<detail::avx512_ops>(out, z, term);
      case simd_kernel::avx2:
        return add_finish_of<detail::avx2_ops>(out, z, term);
#endif
      default:
        return add_finish_of<detail::scalar_ops>(out, z, term);
    }
  }

  // Floats of a term and of the fold (the first head layer's width, padded to
  // a multiple of detail::packed_width).
  std::size_t term_size() const noexcept {
    return first_.n_pad;
  }

  // The kernel in use (never automatic).
  simd_kernel kernel() const noexcept {
    return kernel_;
  }
  Eigen::Index table_features() const noexcept {
    return static_cast<Eigen::Index>(features_);
  }
  Eigen::Index latent_size() const noexcept {
    return static_cast<Eigen::Index>(latent_);
  }

 private:
  using layer_desc = detail::packed_layer;

  // 32 KiB: NeuroShard's sizes (16 rows x 128 floats, twice) use 17 KiB of it.
  static constexpr std::size_t stack_floats = 8192;
  // One row's scratch (term(), finish()): two vectors of up to 256 floats
  // (2 KiB; one row needs no more).
  static constexpr std::size_t small_floats = 512;
  static constexpr std::size_t max_chunk_rows = 16;
  static constexpr std::size_t min_chunk_rows = 4;  // below: heap scratch, full chunks

  simd_kernel kernel_;
  detail::packed_storage data_;
  std::vector<layer_desc> table_layers_;  // t_hidden
  layer_desc first_;                      // c_hidden's first layer (bias and activation)
  layer_desc project_;                    // its weight with a zero bias, no activation
  std::vector<layer_desc> head_layers_;   // c_hidden between the first and the last layer
  bool single_head_layer_ = false;        // c_hidden is one layer: the cost is z[0]
  std::size_t features_ = 0, mean_ = 0, inv_std_ = 0;
  std::size_t out_w_ = 0, out_k_pad_ = 0;
  float out_b_ = 0.0f;
  bool out_relu_ = false;
  std::size_t latent_ = 0, latent_pad_ = 0;
  std::size_t width_ = 0;       // row stride of the table scratch: widest table-side row
  std::size_t head_width_ = 0;  // widest head-side vector
  std::size_t chunk_rows_ = max_chunk_rows;
  std::size_t scratch_floats_ = 0;

  // The shapes compute_cost_net builds; a hand-edited net that breaks them is
  // refused here rather than read out of bounds later.
  static void validate(const compute_cost_net& net) {
    detail::check_packed_mlp(net.t_hidden, "packed_compute_cost_net.net.t_hidden");
    detail::check_packed_mlp(net.c_hidden, "packed_compute_cost_net.net.c_hidden");
    detail::require_shape(net.feature_norm.mean, 1, net.t_hidden.in_features(),
                          "packed_compute_cost_net.net.feature_norm.mean",
                          "one mean per table feature");
    detail::require_shape(net.feature_norm.stddev, 1, net.t_hidden.in_features(),
                          "packed_compute_cost_net.net.feature_norm.stddev",
                          "one std per table feature");
    if (net.c_hidden.in_features() != net.t_hidden.out_features()) {
      embplan::detail::fail("packed_compute_cost_net.net.c_hidden.in_features",
                            net.c_hidden.in_features(),
                            "the latent size " + std::to_string(net.t_hidden.out_features()));
    }
    if (net.c_hidden.out_features() != 1) {
      embplan::detail::fail("packed_compute_cost_net.net.c_hidden.out_features",
                            net.c_hidden.out_features(), "1 (one cost per device)");
    }
  }

  void pack(const compute_cost_net& net) {
    features_ = static_cast<std::size_t>(net.t_hidden.in_features());
    mean_ = detail::reserve_packed(data_, features_);
    inv_std_ = detail::reserve_packed(data_, features_);
    for (std::size_t f = 0; f < features_; ++f) {
      const auto c = static_cast<Eigen::Index>(f);
      const float sd = net.feature_norm.stddev(0, c);
      data_[mean_ + f] = net.feature_norm.mean(0, c);
      data_[inv_std_ + f] = sd == 0.0f ? 1.0f : 1.0f / sd;  // normalizer: std 0 divides by 1
    }
    width_ = detail::round_up(features_, detail::packed_width);
    for (std::size_t k = 0; k < net.t_hidden.layers.size(); ++k) {
      table_layers_.push_back(detail::pack_linear(data_, net.t_hidden.layers[k],
                                                  detail::packed_activated(net.t_hidden, k)));
      width_ = std::max(width_, table_layers_.back().n_pad);
    }
    latent_ = static_cast<std::size_t>(net.t_hidden.out_features());
    latent_pad_ = table_layers_.back().n_pad;
    // The head: its first layer twice (as itself, and as the projection of a
    // table's latent: zero bias, no activation; see term()), the layers
    // between, and the last (one output) as a dot product.
    const std::size_t last = net.c_hidden.layers.size() - 1;
    first_ = detail::pack_linear(data_, net.c_hidden.layers[0],
                                 detail::packed_activated(net.c_hidden, 0));
    project_ = first_;
    project_.b = detail::reserve_packed(data_, first_.n_pad);  // zeros
    project_.relu = false;
    head_width_ = std::max(latent_pad_, first_.n_pad);
    single_head_layer_ = last == 0;
    for (std::size_t k = 1; k < last; ++k) {
      head_layers_.push_back(detail::pack_linear(data_, net.c_hidden.layers[k],
                                                 detail::packed_activated(net.c_hidden, k)));
      head_width_ = std::max(head_width_, head_layers_.back().n_pad);
    }
    if (!single_head_layer_) {
      const linear& out = net.c_hidden.layers[last];
      out_k_pad_ = detail::round_up(static_cast<std::size_t>(out.in_features()), 16);
      out_w_ = detail::reserve_packed(data_, out_k_pad_);
      for (Eigen::Index i = 0; i < out.in_features(); ++i)
        data_[out_w_ + static_cast<std::size_t>(i)] = out.weight(0, i);
      out_b_ = out.bias(0, 0);
      out_relu_ = detail::packed_activated(net.c_hidden, last);
    }

    // run()'s scratch: z, two [chunk, width_] table buffers, one row of the
    // wider of the two (the scalar kernel's temporary). Fewer rows per chunk
    // when wide layers would overflow the stack buffer; past that, the heap.
    const std::size_t fixed = first_.n_pad + std::max(width_, first_.n_pad);
    chunk_rows_ = max_chunk_rows;
    if (fixed + 2 * chunk_rows_ * width_ > stack_floats) {
      const std::size_t fit = fixed < stack_floats ? (stack_floats - fixed) / (2 * width_) : 0;
      if (fit >= min_chunk_rows) chunk_rows_ = fit;
    }
    scratch_floats_ = fixed + 2 * chunk_rows_ * width_;
  }

  detail::layer_view view(const layer_desc& d) const noexcept {
    return d.view(data_);
  }

  // z = start + the rows' terms in row order (each row: the table MLP, then
  // the projection, summed into z by the kernel), then the rest of the head.
  template <class Ops>
  float run(const float* x, std::size_t x_stride, std::size_t rows, float* scratch) const {
    float* z = scratch;
    float* a = z + first_.n_pad;
    float* b = a + chunk_rows_ * width_;
    float* tmp = b + chunk_rows_ * width_;
    start(z);
    const detail::norm_view nv{data_.data() + mean_, data_.data() + inv_std_, features_};
    for (std::size_t r0 = 0; r0 < rows; r0 += chunk_rows_) {
      const std::size_t n = std::min(chunk_rows_, rows - r0);
      Ops::normalize(x + r0 * x_stride, x_stride, n, nv, a, width_);
      float* in = a;
      float* out = b;
      for (const layer_desc& d : table_layers_) {
        Ops::layer(in, width_, n, view(d), out, width_);
        std::swap(in, out);
      }
      Ops::layer_sum(in, width_, n, view(project_), z, tmp);
    }
    return finish_of<Ops>(z);
  }

  template <class Ops>
  float add_finish_of(float* out, const float* z, const float* term) const {
    const std::size_t n = first_.n_pad;
    if (!single_head_layer_ && head_layers_.empty() && first_.relu) {
      // The dot reads out_k_pad_ <= n floats (both multiples of 16); the
      // rest of the sum is added on its own.
      const std::size_t k = out_k_pad_;
      if (k < n) {
        if (out != z) std::copy(z + k, z + n, out + k);
        Ops::add(out + k, term + k, n - k);
      }
      return last_bias(Ops::add_relu_dot(out, z, term, data_.data() + out_w_, k));
    }
    if (out != z) std::copy_n(z, n, out);
    Ops::add(out, term, n);
    return finish_of<Ops>(out);
  }

  // The head after its first layer's sum: `z` (first_.n_pad floats, zero
  // past the first layer's width) through the first layer's activation and
  // the remaining layers. NeuroShard's head (32-64-1) has no layer between:
  // the activation and the last layer are one pass over z.
  template <class Ops>
  float finish_of(const float* z) const {
    if (single_head_layer_) return first_.relu ? detail::packed_relu(z[0]) : z[0];
    const float* out_w = data_.data() + out_w_;
    float y = 0.0f;
    if (head_layers_.empty()) {
      y = first_.relu ? Ops::relu_dot(z, out_w, out_k_pad_) : Ops::dot(z, out_w, out_k_pad_);
    } else {
      detail::scratch_floats<small_floats> scratch(2 * head_width_);
      float* in = scratch.data();
      float* out = in + head_width_;
      std::copy_n(z, first_.n_pad, in);
      if (first_.relu) {
        for (std::size_t i = 0; i < first_.n_pad; ++i)
          in[i] = detail::packed_relu(in[i]);
      }
      for (const layer_desc& d : head_layers_) {
        Ops::vecmat(in, view(d), out);
        std::swap(in, out);
      }
      y = Ops::dot(in, out_w, out_k_pad_);
    }
    return last_bias(y);
  }

  // The last layer's bias and activation on its dot product y.
  float last_bias(float y) const {
    y = y + out_b_;
    return out_relu_ ? detail::packed_relu(y) : y;
  }

  // run()'s work for one row, its term stored instead of summed.
  template <class Ops>
  void term_of(const float* x, float* scratch, float* term) const {
    float* in = scratch;
    float* out = in + width_;
    const detail::norm_view nv{data_.data() + mean_, data_.data() + inv_std_, features_};
    Ops::normalize(x, features_, 1, nv, in, width_);
    for (const layer_desc& d : table_layers_) {
      Ops::layer(in, width_, 1, view(d), out, width_);
      std::swap(in, out);
    }
    Ops::layer(in, width_, 1, view(project_), term, first_.n_pad);
  }
};

}  // namespace embplan::inline EMBPLAN_ABI::nn

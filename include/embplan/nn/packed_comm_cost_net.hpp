#pragma once
// An inference snapshot of NeuroShard's communication-cost network
// (comm_cost_net, MLSys'23 App. C: features normalised, MLP 128-64-32-16 with
// ReLU between, one linear output per device) for the planner's inner loop,
// which prices one plan's all-to-alls at a time, batch 1. comm_cost_net runs on
// Eigen's matrix-vector product, whose dispatch costs more than the ~14k
// multiply-adds of a 4- or 8-device net; this snapshot copies the weights
// once into the packed kernels' layout (transposed, zero-padded to 32 floats,
// cache-line aligned; detail/packed_layers.hpp) and runs every layer through
// the kernels' one-row vecmat (four partial sums per output, so the FMA chains
// are a quarter as deep), AVX-512 or AVX2+FMA chosen at run time.
//
// Immutable after construction: operator() is const, allocates nothing for
// layers up to 256 wide (its scratch is on the stack) and may be called from
// many threads. The normalisation is comm_cost_net's own, (x - mean) / std
// with a division (std 0: x - mean), so the first layer reads the same floats
// as Eigen's; the layers' results equal comm_cost_net's up to float rounding
// (the multiply-adds are fused and summed in the vecmat contract's order).
//
// Every kernel gives the same floats, bit for bit: the normalisation is one
// scalar loop for all of them, and the layers follow the vecmat contract in
// detail/packed_layers.hpp, so a plan priced with this net does not depend on
// the kernel the CPU gets (nn/packed_compute_cost_net.hpp says the same of the
// compute net). `kernel` exists so that tests and benchmarks can run each.

#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/comm_cost_net.hpp"
#include "embplan/nn/detail/packed_kernels_x86.hpp"
#include "embplan/nn/detail/packed_layers.hpp"
#include "embplan/nn/detail/packed_mlp.hpp"
#include "embplan/nn/simd_kernel.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

class packed_comm_cost_net {
 public:
  // Copies and repacks net's weights and normaliser; later changes to net do
  // not reach the snapshot. kernel: the path to run; one this CPU (or this
  // compiler) cannot run throws, naming it, as does a net of broken shapes.
  explicit packed_comm_cost_net(const comm_cost_net& net,
                                simd_kernel kernel = simd_kernel::automatic)
      : kernel_(detail::resolve_simd_kernel(kernel, simd_kernel_supported(simd_kernel::avx2),
                                            simd_kernel_supported(simd_kernel::avx512),
                                            "packed_comm_cost_net.kernel")) {
    validate(net);
    pack(net);
  }

  // One input row (features() raw floats) -> the outputs() per-device costs,
  // as comm_cost_net::operator() on a one-row matrix.
  void operator()(std::span<const float> x, std::span<float> y) const {
    if (x.size() != features_) {
      embplan::detail::fail("packed_comm_cost_net.input.size", x.size(),
                            "the network's feature count " + std::to_string(features_));
    }
    if (y.size() != outputs_) {
      embplan::detail::fail("packed_comm_cost_net.output.size", y.size(),
                            "the network's output count " + std::to_string(outputs_));
    }
    detail::scratch_floats<stack_floats> buf(2 * width_);
    switch (kernel_) {
#ifdef EMBPLAN_NN_X86_KERNELS
      case simd_kernel::avx512:
        return run<detail::avx512_ops>(x.data(), buf.data(), y.data());
      case simd_kernel::avx2:
        return run<detail::avx2_ops>(x.data(), buf.data(), y.data());
#endif
      default:
        return run<detail::scalar_ops>(x.data(), buf.data(), y.data());
    }
  }

  // Several input rows at once: x holds rows x features() raw floats, row
  // after row, y gets rows x outputs(). Each row's outputs are, bit for bit,
  // operator()'s on that row alone (the layers run through Ops::vecmat_rows,
  // which shares the weight loads between rows and nothing else); what it
  // saves is the weights' trips from cache: one per chunk of rows instead of
  // one per row. Allocates nothing for layers up to 256 wide.
  void batch(std::span<const float> x, std::span<float> y) const {
    if (x.size() % features_ != 0) {
      embplan::detail::fail(
          "packed_comm_cost_net.input.size", x.size(),
          "a multiple of the network's feature count " + std::to_string(features_));
    }
    const std::size_t rows = x.size() / features_;
    if (y.size() != rows * outputs_) {
      embplan::detail::fail(
          "packed_comm_cost_net.output.size", y.size(),
          std::to_string(rows) + " rows x the network's output count " + std::to_string(outputs_));
    }
    detail::scratch_floats<batch_rows * stack_floats> buf(batch_rows * 2 * width_);
    for (std::size_t r = 0; r < rows; r += batch_rows) {
      const std::size_t n = std::min(batch_rows, rows - r);
      const float* xr = x.data() + r * features_;
      float* yr = y.data() + r * outputs_;
      switch (kernel_) {
#ifdef EMBPLAN_NN_X86_KERNELS
        case simd_kernel::avx512:
          run_rows<detail::avx512_ops>(xr, n, buf.data(), yr);
          break;
        case simd_kernel::avx2:
          run_rows<detail::avx2_ops>(xr, n, buf.data(), yr);
          break;
#endif
        default:
          run_rows<detail::scalar_ops>(xr, n, buf.data(), yr);
      }
    }
  }

  // The kernel in use (never automatic).
  simd_kernel kernel() const noexcept {
    return kernel_;
  }
  std::size_t features() const noexcept {
    return features_;
  }
  std::size_t outputs() const noexcept {
    return outputs_;
  }

 private:
  // Two vectors of up to 256 floats (2 KiB); NeuroShard's nets use 128.
  static constexpr std::size_t stack_floats = 512;
  // batch()'s rows per pass through the layers (its scratch: this many times
  // operator()'s).
  static constexpr std::size_t batch_rows = 12;

  simd_kernel kernel_;
  detail::packed_storage data_;
  std::vector<detail::packed_layer> layers_;
  std::size_t features_ = 0, outputs_ = 0, mean_ = 0, stddev_ = 0;
  std::size_t width_ = 0;  // the widest vector: the input or a layer's padded output

  static void validate(const comm_cost_net& net) {
    detail::check_packed_mlp(net.hidden, "packed_comm_cost_net.net.hidden");
    detail::require_shape(net.feature_norm.mean, 1, net.hidden.in_features(),
                          "packed_comm_cost_net.net.feature_norm.mean",
                          "one mean per input feature");
    detail::require_shape(net.feature_norm.stddev, 1, net.hidden.in_features(),
                          "packed_comm_cost_net.net.feature_norm.stddev",
                          "one std per input feature");
  }

  void pack(const comm_cost_net& net) {
    features_ = static_cast<std::size_t>(net.hidden.in_features());
    outputs_ = static_cast<std::size_t>(net.hidden.out_features());
    mean_ = detail::reserve_packed(data_, features_);
    stddev_ = detail::reserve_packed(data_, features_);
    for (std::size_t f = 0; f < features_; ++f) {
      const auto c = static_cast<Eigen::Index>(f);
      data_[mean_ + f] = net.feature_norm.mean(0, c);
      data_[stddev_ + f] = net.feature_norm.stddev(0, c);
    }
    width_ = detail::round_up(features_, detail::packed_width);
    for (std::size_t k = 0; k < net.hidden.layers.size(); ++k) {
      layers_.push_back(detail::pack_linear(data_, net.hidden.layers[k],
                                            detail::packed_activated(net.hidden, k)));
      width_ = std::max(width_, layers_.back().n_pad);
    }
  }

  // normalizer::apply's arithmetic (a subtraction, then a division unless the
  // std is 0), then every layer through Ops::vecmat.
  template <class Ops>
  void run(const float* x, float* scratch, float* y) const {
    float* in = scratch;
    float* out = in + width_;
    const float* mean = data_.data() + mean_;
    const float* stddev = data_.data() + stddev_;
    for (std::size_t f = 0; f < features_; ++f) {
      const float centred = x[f] - mean[f];
      in[f] = stddev[f] == 0.0f ? centred : centred / stddev[f];
    }
    for (const detail::packed_layer& l : layers_) {
      Ops::vecmat(in, l.view(data_), out);
      std::swap(in, out);
    }
    std::copy_n(in, outputs_, y);
  }

  // run() on `rows` rows (at most batch_rows): the same normalisation per
  // row, then every layer through Ops::vecmat_rows. Rows are width_ apart in
  // the scratch.
  template <class Ops>
  void run_rows(const float* x, std::size_t rows, float* scratch, float* y) const {
    float* in = scratch;
    float* out = in + rows * width_;
    const float* mean = data_.data() + mean_;
    const float* stddev = data_.data() + stddev_;
    for (std::size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * features_;
      float* row = in + r * width_;
      for (std::size_t f = 0; f < features_; ++f) {
        const float centred = xr[f] - mean[f];
        row[f] = stddev[f] == 0.0f ? centred : centred / stddev[f];
      }
    }
    for (const detail::packed_layer& l : layers_) {
      Ops::vecmat_rows(in, width_, rows, l.view(data_), out, width_);
      std::swap(in, out);
    }
    for (std::size_t r = 0; r < rows; ++r)
      std::copy_n(in + r * width_, outputs_, y + r * outputs_);
  }
};

}  // namespace embplan::inline EMBPLAN_ABI::nn

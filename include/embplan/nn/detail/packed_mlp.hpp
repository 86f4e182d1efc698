#pragma once
// Packing an nn::mlp's layers into the layout of the packed kernels
// (detail/packed_layers.hpp), shared by the packed networks
// (nn/packed_compute_cost_net.hpp, nn/packed_comm_cost_net.hpp).

#include <Eigen/Core>

#include <cstddef>
#include <string>

#include "embplan/core/error.hpp"
#include "embplan/nn/detail/packed_layers.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn::detail {

// Offsets into a packed_storage of one layer (see layer_view).
struct packed_layer {
  std::size_t w = 0, b = 0, k = 0, n_pad = 0;
  bool relu = false;

  layer_view view(const packed_storage& data) const noexcept {
    return {data.data() + w, data.data() + b, k, n_pad, relu};
  }
};

// The shapes nn::mlp builds; a hand-edited net that breaks them is refused
// here (field names it) rather than read out of bounds later.
inline void check_packed_mlp(const mlp& m, const std::string& field) {
  if (m.layers.empty()) embplan::detail::fail(field + ".layers", 0, "at least one layer");
  for (std::size_t k = 0; k < m.layers.size(); ++k) {
    const linear& l = m.layers[k];
    const std::string name = embplan::detail::path(field + ".layers", k);
    if (k > 0 && l.in_features() != m.layers[k - 1].out_features()) {
      embplan::detail::fail(
          name + ".in_features", l.in_features(),
          "the previous layer's out_features " + std::to_string(m.layers[k - 1].out_features()));
    }
    require_shape(l.bias, 1, l.out_features(), name + ".bias", "[1, out_features]");
    require_positive(l.in_features(), name + ".in_features");
    require_positive(l.out_features(), name + ".out_features");
  }
}

// Whether m's layer k is followed by a ReLU (nn::mlp's rule).
inline bool packed_activated(const mlp& m, std::size_t k) noexcept {
  return k + 1 < m.layers.size() || m.relu_after_last;
}

// Appends n floats (zeros) to data, aligned to a cache line; returns the offset.
inline std::size_t reserve_packed(packed_storage& data, std::size_t n) {
  const std::size_t at = round_up(data.size(), 16);
  data.resize(at + round_up(n, 16), 0.0f);
  return at;
}

// Weight [out, in] -> [in][out_pad], bias [1, out] -> [out_pad], appended to data.
inline packed_layer pack_linear(packed_storage& data, const linear& l, bool relu) {
  packed_layer d;
  d.k = static_cast<std::size_t>(l.in_features());
  const auto out = static_cast<std::size_t>(l.out_features());
  d.n_pad = round_up(out, packed_width);
  d.relu = relu;
  d.w = reserve_packed(data, d.k * d.n_pad);
  d.b = reserve_packed(data, d.n_pad);
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t i = 0; i < d.k; ++i) {
      data[d.w + i * d.n_pad + o] =
          l.weight(static_cast<Eigen::Index>(o), static_cast<Eigen::Index>(i));
    }
    data[d.b + o] = l.bias(0, static_cast<Eigen::Index>(o));
  }
  return d;
}

}  // namespace embplan::inline EMBPLAN_ABI::nn::detail

#pragma once
// Portable body of the CPU embedding bag: any CPU, any dim. The per-element
// arithmetic is exactly the vector bodies' (sum: acc + x; weighted:
// std::fma(w, x, acc); then * bag scale; backward: g = fma(factor, grad, g) in
// segment order, w = fma(-lr, g, w)), so every path gives the same bits.
#include <cmath>
#include <cstdint>

#include "embplan/kernel/detail/embedding_bag_common.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel::detail::scalar {

template <class Weight>
void forward_table(const forward_table_args<Weight>& a) {
  const std::int64_t row_bytes = a.dim * static_cast<std::int64_t>(sizeof(Weight));
  const std::int64_t distance = forward_prefetch_distance(row_bytes);
  const std::int64_t table_end = a.offsets[a.batch_size];
  for (std::int64_t b = 0; b < a.batch_size; ++b) {
    const std::int64_t begin = a.offsets[b];
    const std::int64_t end = a.offsets[b + 1];
    float* out = a.output + index::output_offset(b, a.total_dim, a.d_offset);
    for (std::int64_t d = 0; d < a.dim; ++d)
      out[d] = 0.0f;
    for (std::int64_t i = begin; i < end; ++i) {
      if (i + distance < table_end) {
        prefetch_bytes(a.weights + index::weight_offset(0, a.indices[i + distance], a.dim),
                       row_bytes);
      }
      const Weight* row = a.weights + index::weight_offset(0, a.indices[i], a.dim);
      if (a.per_sample_weights != nullptr) {
        const float w = a.per_sample_weights[i];
        for (std::int64_t d = 0; d < a.dim; ++d)
          out[d] = std::fma(w, to_float(row[d]), out[d]);
      } else {
        for (std::int64_t d = 0; d < a.dim; ++d)
          out[d] += to_float(row[d]);
      }
    }
    const float scale = index::bag_scale(a.mode, end - begin);
    for (std::int64_t d = 0; d < a.dim; ++d)
      out[d] *= scale;
  }
}

inline void store_weight(float& w, float value) noexcept {
  w = value;
}
inline void store_weight(half& w, float value) noexcept {
  w = to_half(value);
}

// scratch: dim floats for the segment's gradient.
template <class Weight>
void backward_table(const backward_table_args<Weight>& a, float* scratch) {
  for (std::int64_t s = 0; s < a.segments; ++s) {
    for (std::int64_t d = 0; d < a.dim; ++d)
      scratch[d] = 0.0f;
    for (std::uint32_t k = a.segment_begin[s]; k < a.segment_begin[s + 1]; ++k) {
      const lookup_info info = a.info[a.sorted_positions[k]];
      const float* g = a.grad_output + index::output_offset(info.sample, a.total_dim, a.d_offset);
      for (std::int64_t d = 0; d < a.dim; ++d)
        scratch[d] = std::fma(info.factor, g[d], scratch[d]);
    }
    Weight* row = a.weights + index::weight_offset(0, a.segment_rows[s] - a.row_offset, a.dim);
    for (std::int64_t d = 0; d < a.dim; ++d)
      store_weight(row[d], std::fma(-a.learning_rate, scratch[d], to_float(row[d])));
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail::scalar

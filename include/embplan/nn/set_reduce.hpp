#pragma once
// Set reductions over variable-length groups in one batched call: rows [N, F]
// with a group id per row -> [G, F] by sum, max or mean. This is how the
// papers' cost networks turn per-table representations into per-device ones:
// NeuroShard's ComputeCostNet and DreamShard's kernel_forward sum with
// `index_add_` over `repeat_interleave(arange(B), lengths)`; DreamShard's
// overall cost takes the max over devices.
//
// Groups need not be contiguous or sorted. An empty group yields 0 for every
// reduction (sum and mean of nothing are 0; max of nothing is defined as 0,
// what PyTorch's scatter_reduce(include_self=False) onto zeros gives), and
// its gradient is 0. The gradient of max goes to the row holding the maximum;
// on ties, to the first such row (lowest row index).
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

enum class reduction : std::uint8_t { sum, max, mean };

// repeat_interleave(arange(G), lengths): the group id of every row when group g
// holds lengths[g] consecutive rows.
inline std::vector<std::int64_t> group_ids_from_lengths(std::span<const std::int64_t> lengths) {
  std::vector<std::int64_t> out;
  for (std::size_t g = 0; g < lengths.size(); ++g) {
    if (lengths[g] < 0)
      embplan::detail::fail(embplan::detail::path("lengths", g), lengths[g],
                            "a non-negative integer");
    out.insert(out.end(), static_cast<std::size_t>(lengths[g]), static_cast<std::int64_t>(g));
  }
  return out;
}

// The same from offsets (offsets[0] == 0, non-decreasing; group g holds rows
// [offsets[g], offsets[g + 1])): the layout of a CSR / TBE offsets array.
inline std::vector<std::int64_t> group_ids_from_offsets(std::span<const std::int64_t> offsets) {
  if (offsets.empty() || offsets[0] != 0) {
    embplan::detail::fail("offsets[0]", offsets.empty() ? -1 : offsets[0],
                          "0 (offsets of G groups hold G + 1 entries, starting at 0)");
  }
  std::vector<std::int64_t> out;
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g) {
    if (offsets[g + 1] < offsets[g]) {
      embplan::detail::fail(embplan::detail::path("offsets", g + 1), offsets[g + 1],
                            "offsets that do not decrease");
    }
    out.insert(out.end(), static_cast<std::size_t>(offsets[g + 1] - offsets[g]),
               static_cast<std::int64_t>(g));
  }
  return out;
}

namespace detail {

inline void require_groups(Eigen::Index rows, std::span<const std::int64_t> group,
                           Eigen::Index groups) {
  if (static_cast<Eigen::Index>(group.size()) != rows) {
    embplan::detail::fail("set_reduce.group.size", group.size(),
                          "one group id per row (" + std::to_string(rows) + " rows)");
  }
  if (groups < 0) embplan::detail::fail("set_reduce.groups", groups, "a non-negative integer");
  for (std::size_t r = 0; r < group.size(); ++r) {
    if (group[r] < 0 || group[r] >= groups) {
      embplan::detail::fail(embplan::detail::path("set_reduce.group", r), group[r],
                            "a group id in [0, " + std::to_string(groups) + ")");
    }
  }
}

}  // namespace detail

// out [groups, F] = reduction of the rows of each group. For max, *argmax (when
// given) receives, per output entry (g, f) in row-major order, the row that
// holds the maximum, or -1 for an empty group: what set_reduce_backward needs.
template <class = void>
void set_reduce(reduction op, const Eigen::Ref<const matrix>& rows,
                std::span<const std::int64_t> group, Eigen::Index groups, matrix& out,
                std::vector<Eigen::Index>* argmax = nullptr) {
  detail::require_groups(rows.rows(), group, groups);
  const Eigen::Index features = rows.cols();
  out.setZero(groups, features);
  if (op == reduction::max) {
    std::vector<Eigen::Index> local;
    std::vector<Eigen::Index>& arg = argmax != nullptr ? *argmax : local;
    arg.assign(static_cast<std::size_t>(groups * features), -1);
    for (Eigen::Index r = 0; r < rows.rows(); ++r) {
      const auto g = static_cast<Eigen::Index>(group[static_cast<std::size_t>(r)]);
      for (Eigen::Index f = 0; f < features; ++f) {
        auto& best = arg[static_cast<std::size_t>(g * features + f)];
        if (best < 0 || rows(r, f) > out(g, f)) {
          best = r;
          out(g, f) = rows(r, f);
        }
      }
    }
    return;
  }
  for (Eigen::Index r = 0; r < rows.rows(); ++r)
    out.row(group[static_cast<std::size_t>(r)]) += rows.row(r);
  if (op == reduction::mean) {
    std::vector<Eigen::Index> count(static_cast<std::size_t>(groups), 0);
    for (const auto g : group)
      ++count[static_cast<std::size_t>(g)];
    for (Eigen::Index g = 0; g < groups; ++g) {
      if (count[static_cast<std::size_t>(g)] > 0)
        out.row(g) /= static_cast<float>(count[static_cast<std::size_t>(g)]);
    }
  }
}

// Given dout = dL/dout [groups, F], writes drows = dL/drows [N, F] (N =
// group.size()). For max, argmax is what set_reduce wrote.
template <class = void>
void set_reduce_backward(reduction op, const Eigen::Ref<const matrix>& dout,
                         std::span<const std::int64_t> group, std::span<const Eigen::Index> argmax,
                         matrix& drows) {
  const auto n = static_cast<Eigen::Index>(group.size());
  const Eigen::Index groups = dout.rows();
  const Eigen::Index features = dout.cols();
  detail::require_groups(n, group, groups);
  if (op == reduction::max) {
    if (static_cast<Eigen::Index>(argmax.size()) != groups * features) {
      embplan::detail::fail("set_reduce_backward.argmax.size", argmax.size(),
                            "groups x features entries, as set_reduce wrote them");
    }
    drows.setZero(n, features);
    for (Eigen::Index g = 0; g < groups; ++g) {
      for (Eigen::Index f = 0; f < features; ++f) {
        const Eigen::Index r = argmax[static_cast<std::size_t>(g * features + f)];
        if (r >= n) {
          embplan::detail::fail("set_reduce_backward.argmax", r,
                                "a row below " + std::to_string(n) + " or -1");
        }
        if (r >= 0) drows(r, f) += dout(g, f);
      }
    }
    return;
  }
  drows.resize(n, features);
  std::vector<Eigen::Index> count;
  if (op == reduction::mean) {
    count.assign(static_cast<std::size_t>(groups), 0);
    for (const auto g : group)
      ++count[static_cast<std::size_t>(g)];
  }
  for (Eigen::Index r = 0; r < n; ++r) {
    const auto g = static_cast<std::size_t>(group[static_cast<std::size_t>(r)]);
    if (op == reduction::mean) {
      drows.row(r) = dout.row(static_cast<Eigen::Index>(g)) / static_cast<float>(count[g]);
    } else {
      drows.row(r) = dout.row(static_cast<Eigen::Index>(g));
    }
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::nn

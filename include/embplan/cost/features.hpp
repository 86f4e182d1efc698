#pragma once
// Table features for the learned cost models, in the two orders a model may
// have been trained with:
//   embplan21    dim, rows (hash size), pooling factor, table size (MiB),
//                bin_0 .. bin_16 — AutoShard App. B.2 / DreamShard App. A.2's
//                21 features ("dimension, hash size, pooling factor, table
//                size, indices distribution");
//   neuroshard20 NeuroShard's table_configs keys sorted as strings
//                (utils.dict2tensor: bin_0, bin_1, bin_10 .. bin_16,
//                bin_2 .. bin_9, dim, pooling_factor, row): its
//                ComputeCostNet reads them in that order and has no size.
// A column piece is the table at a smaller dim (NeuroShard §3.1, table
// augmentation), a row piece the table with its share of rows and lookups.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

enum class feature_set : std::uint8_t { embplan21, neuroshard20 };

constexpr std::string_view to_string(feature_set f) noexcept {
  return f == feature_set::embplan21 ? "embplan21" : "neuroshard20";
}

inline feature_set parse_feature_set(std::string_view s, std::string_view field) {
  if (s == "embplan21") return feature_set::embplan21;
  if (s == "neuroshard20") return feature_set::neuroshard20;
  embplan::detail::fail(field, s, "\"embplan21\" or \"neuroshard20\"");
}

constexpr std::size_t feature_count(feature_set f) noexcept {
  return f == feature_set::embplan21 ? 21 : 20;
}

// The reuse bin at position i of the feature set's bin block: in order for
// embplan21; in string order of "bin_<k>" for neuroshard20 (0, 1, 10 .. 16, 2 .. 9).
constexpr std::size_t reuse_bin_at(feature_set f, std::size_t i) noexcept {
  if (f == feature_set::embplan21 || i < 2) return i;
  return i < 9 ? i + 8 : i - 7;
}

inline std::vector<std::string> feature_names(feature_set f) {
  std::vector<std::string> out;
  if (f == feature_set::embplan21) out = {"dim", "rows", "pooling_factor", "size_mib"};
  for (std::size_t i = 0; i < reuse_bin_count; ++i)
    out.push_back("bin_" + std::to_string(reuse_bin_at(f, i)));
  if (f == feature_set::neuroshard20) {
    out.push_back("dim");
    out.push_back("pooling_factor");
    out.push_back("row");
  }
  return out;
}

// Writes the features of `t` (at its own dim) into out[0 .. feature_count).
// Every learned model (neural_cost, dreamshard_cost, the RL policies) sees a
// table only through these features, which were measured in HBM and carry no
// tier, so a table off hbm is refused here rather than priced as if in HBM.
inline void table_features(const table_spec& t, feature_set f, std::span<float> out) {
  if (t.placement.tier != memory_tier::hbm) [[unlikely]] {
    embplan::detail::fail("tables." + t.name + ".tier", to_string(t.placement.tier),
                          "hbm: a learned cost model prices tables in HBM only; plan a task "
                          "with uvm_caching or host tables with the analytic model");
  }
  if (out.size() < feature_count(f)) {
    embplan::detail::fail("table_features.out.size", out.size(),
                          "at least " + std::to_string(feature_count(f)));
  }
  std::size_t i = 0;
  if (f == feature_set::embplan21) {
    out[i++] = static_cast<float>(t.dim);
    out[i++] = static_cast<float>(t.rows);
    out[i++] = static_cast<float>(t.pooling_factor);
    out[i++] = static_cast<float>(static_cast<double>(table_bytes(t)) / (1024.0 * 1024.0));
  }
  for (std::size_t k = 0; k < reuse_bin_count; ++k)
    out[i++] = static_cast<float>(t.reuse_hist[reuse_bin_at(f, k)]);
  if (f == feature_set::neuroshard20) {
    out[i++] = static_cast<float>(t.dim);
    out[i++] = static_cast<float>(t.pooling_factor);
    out[i++] = static_cast<float>(t.rows);
  }
}

}  // namespace embplan::inline EMBPLAN_ABI

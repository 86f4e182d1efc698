#pragma once
// Import of a raw PyTorch checkpoint of NeuroShard's ComputeCostNet
// (neuroshard/compute_cost_model.py) as a neural_cost: a safetensors file
// holding only the state_dict — t_hidden.{k}.weight/bias, c_hidden.{k}.weight/bias
// (tools/export_state_dict.py writes one from the .pt file) — and, when
// exported from ComputeCostModel.save()'s dict, feature_means / feature_stds.
// No embplan metadata: the caller says what the file cannot — the feature
// normalisation (unless the file holds it), the meter and the batch size the
// training data were measured at.
//
// The feature set is neuroshard20 (cost/features.hpp): NeuroShard's
// table_configs keys in string order, no size feature. The layer sizes are
// read from the tensor shapes; a file that is not that network (a missing or
// extra tensor, a shape that breaks the chain, another input width) is
// refused with the tensor named.
#include <Eigen/Core>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/cost/features.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/serialize.hpp"

namespace embplan::cost {

struct neuroshard_import_options {
  // NeuroShard's feature_means / feature_stds (20 each); leave empty when the
  // file holds them. Given both ways, the import refuses (which one is meant?).
  std::vector<float> feature_means;
  std::vector<float> feature_stds;
  std::string meter = "unknown";  // what measured NeuroShard's training data
  std::int64_t batch_size = 0;    // the batch its costs were measured at
  double forward_share = 0.5;     // forward / (forward + backward), for the split
  std::string trained_on = "NeuroShard ComputeCostNet checkpoint";
};

namespace detail {

inline std::string shape_of(const io::tensor& t) {
  std::string out = "[";
  for (std::size_t i = 0; i < t.shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(t.shape[i]);
  return out + "]";
}

// The sizes of ModuleList `prefix` ([in, out_0, out_1, ...]) from its
// weights' shapes, checked to chain; `in` is the width the first must read.
inline std::vector<Eigen::Index> module_list_sizes(const io::safetensors_file& file,
                                                   const std::string& source,
                                                   const std::string& prefix, Eigen::Index in,
                                                   const std::string& in_what) {
  std::vector<Eigen::Index> sizes{in};
  for (std::size_t k = 0;; ++k) {
    const std::string name = prefix + "." + std::to_string(k) + ".weight";
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) break;
    const auto& t = it->second;
    if (t.shape.size() != 2 || t.shape[1] != sizes.back()) {
      embplan::detail::fail(source + ": tensors[\"" + name + "\"].shape", shape_of(t),
                            "[out, " + std::to_string(sizes.back()) + "] (" +
                                (k == 0 ? in_what : "the previous layer's outputs") + ")");
    }
    sizes.push_back(static_cast<Eigen::Index>(t.shape[0]));
  }
  if (sizes.size() < 2) {
    embplan::detail::fail(source + ": tensors[\"" + prefix + ".0.weight\"]", "(missing)",
                          "NeuroShard ComputeCostNet's " + prefix + " layers");
  }
  return sizes;
}

}  // namespace detail

inline neural_cost import_neuroshard(const std::filesystem::path& path,
                                     const neuroshard_import_options& o) {
  auto file = io::read_safetensors(path);
  const std::string src = path.string();
  constexpr auto features = feature_set::neuroshard20;
  const auto f = static_cast<Eigen::Index>(feature_count(features));
  if (o.batch_size < 1) {
    embplan::detail::fail("neuroshard_import.batch_size", o.batch_size,
                          "the positive batch size NeuroShard's costs were measured at");
  }
  // The normalisation: the caller's or the file's, exactly one of them.
  const bool in_file = file.tensors.count("feature_means") + file.tensors.count("feature_stds") > 0;
  const bool given = !o.feature_means.empty() || !o.feature_stds.empty();
  if (in_file && given) {
    embplan::detail::fail("neuroshard_import.feature_means", src,
                          "normalisation from the caller or from the file, not both (the file "
                          "holds feature_means / feature_stds)");
  }
  if (!in_file) {
    if (!given) {
      embplan::detail::fail("neuroshard_import.feature_means", "(empty)",
                            "NeuroShard's feature_means and feature_stds (" + std::to_string(f) +
                                " each): " + src + " holds no normalisation");
    }
    for (const auto& [name, v] :
         {std::pair{"feature_means", &o.feature_means}, {"feature_stds", &o.feature_stds}}) {
      if (static_cast<Eigen::Index>(v->size()) != f) {
        embplan::detail::fail(std::string("neuroshard_import.") + name + ".size", v->size(),
                              std::to_string(f) + " (feature set neuroshard20)");
      }
      io::tensor t;
      t.dtype = "F32";
      t.shape = {static_cast<std::int64_t>(f)};
      t.values.assign(v->begin(), v->end());
      file.tensors.emplace(name, std::move(t));
    }
    for (std::size_t i = 0; i < o.feature_stds.size(); ++i) {
      if (!(o.feature_stds[i] > 0.0f)) {
        embplan::detail::fail("neuroshard_import.feature_stds[" + std::to_string(i) + "]",
                              o.feature_stds[i], "a positive standard deviation");
      }
    }
  }
  const auto table =
      detail::module_list_sizes(file, src, "t_hidden", f, "the 20 neuroshard20 table features");
  const auto pred =
      detail::module_list_sizes(file, src, "c_hidden", table.back(), "the table MLP's latent size");
  if (pred.back() != 1) {
    const std::string last = "c_hidden." + std::to_string(pred.size() - 2) + ".weight";
    embplan::detail::fail(src + ": tensors[\"" + last + "\"].shape",
                          detail::shape_of(file.tensors.at(last)),
                          "[1, " + std::to_string(pred[pred.size() - 2]) + "] (one cost)");
  }
  nn::compute_cost_net_options arch;
  arch.table_features = f;
  arch.table_mlp_sizes.assign(table.begin() + 1, table.end());
  arch.pred_mlp_sizes.assign(pred.begin(), pred.end() - 1);
  nn::compute_cost_net net(arch);
  nn::load_state_dict(net, file);  // strict: names an extra or missing tensor
  neural_cost_metadata meta;
  meta.features = features;
  meta.meter = o.meter;
  meta.batch_size = o.batch_size;
  meta.forward_share = o.forward_share;
  meta.trained_on = o.trained_on;
  meta.extra["imported_from"] = src;
  return neural_cost(net, std::move(meta));
}

}  // namespace embplan::cost

#pragma once
// Import of raw PyTorch checkpoints of NeuroShard's cost models (MLSys'23
// §3.2, App. C):
//  - import_neuroshard: ComputeCostNet (neuroshard/compute_cost_model.py) as a
//    neural_cost, from a safetensors file of its state_dict (t_hidden.{k},
//    c_hidden.{k}; tools/export_state_dict.py writes one from the .pt file)
//    and, where exported from ComputeCostModel.save()'s dict, feature_means /
//    feature_stds; feature set neuroshard20 (cost/features.hpp);
//  - import_neuroshard_comm: the forward and backward CommCostNet
//    (neuroshard/comm_cost_model.py; hidden.{k}) as a neural_comm, whose rows
//    (dim sums, start skews) are those NeuroShard's simulator feeds them; the
//    device count is read from the backward net's input width.
// No embplan metadata in either: the caller says what the files cannot — the
// feature normalisation (unless a file holds it), the meter and the batch size
// the training data were measured at. The layer sizes are read from the
// tensor shapes; a file that is not that network (a missing or extra tensor,
// a shape that breaks the chain, another input width) is refused with the
// tensor named.
// Design notes: docs/design/learned-cost-models.md.
#include <Eigen/Core>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/cost/features.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/comm_cost_net.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::learn {

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

struct neuroshard_comm_import_options {
  // Each network's CommCostModel feature_means / feature_stds (forward: 2 x
  // devices, backward: devices); leave a pair empty when its file holds them.
  std::vector<float> forward_means;
  std::vector<float> forward_stds;
  std::vector<float> backward_means;
  std::vector<float> backward_stds;
  std::size_t devices = 0;        // 0: the backward net's input width; else checked against it
  std::string meter = "unknown";  // what measured NeuroShard's all-to-alls
  std::int64_t batch_size = 0;    // the global batch of those all-to-alls
  std::string trained_on = "NeuroShard CommCostNet checkpoints";
};

namespace detail {

inline std::string shape_of(const io::tensor& t) {
  std::string out = "[";
  for (std::size_t i = 0; i < t.shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(t.shape[i]);
  return out + "]";
}

// The sizes of ModuleList `prefix` ([in, out_0, out_1, ...]) from its
// weights' shapes, checked to chain; `in` is the width the first must read,
// `network` names what the file should hold.
inline std::vector<Eigen::Index> module_list_sizes(const io::safetensors_file& file,
                                                   const std::string& source,
                                                   const std::string& prefix, Eigen::Index in,
                                                   const std::string& in_what,
                                                   const std::string& network) {
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
                          network + "'s " + prefix + " layers");
  }
  return sizes;
}

// Puts the caller's feature statistics into `file` as feature_means /
// feature_stds, or keeps the file's: exactly one of the two must have them.
// `means_field` / `stds_field` name the caller's fields in messages; `count`
// is the width they must have and `what` says why.
inline void take_normalisation(io::safetensors_file& file, const std::string& source,
                               const std::vector<float>& means, const std::vector<float>& stds,
                               const std::string& means_field, const std::string& stds_field,
                               Eigen::Index count, const std::string& what) {
  const bool in_file = file.tensors.count("feature_means") + file.tensors.count("feature_stds") > 0;
  const bool given = !means.empty() || !stds.empty();
  if (in_file && given) {
    embplan::detail::fail(means_field, source,
                          "normalisation from the caller or from the file, not both (the file "
                          "holds feature_means / feature_stds)");
  }
  if (in_file) return;  // the strict load checks their shapes
  if (!given) {
    embplan::detail::fail(means_field, "(empty)",
                          "the feature means and standard deviations (" + std::to_string(count) +
                              " each, " + what + "): " + source + " holds no normalisation");
  }
  for (const auto& [field, v] : {std::pair{&means_field, &means}, {&stds_field, &stds}}) {
    if (static_cast<Eigen::Index>(v->size()) != count) {
      embplan::detail::fail(*field + ".size", v->size(), std::to_string(count) + " (" + what + ")");
    }
  }
  for (std::size_t i = 0; i < stds.size(); ++i) {
    if (!(stds[i] > 0.0f)) {
      embplan::detail::fail(stds_field + "[" + std::to_string(i) + "]", stds[i],
                            "a positive standard deviation");
    }
  }
  for (const auto& [name, v] : {std::pair{"feature_means", &means}, {"feature_stds", &stds}}) {
    io::tensor t;
    t.dtype = "F32";
    t.shape = {static_cast<std::int64_t>(count)};
    t.values.assign(v->begin(), v->end());
    file.tensors.emplace(name, std::move(t));
  }
}

inline void require_batch_size(const char* field, std::int64_t batch_size, const char* what) {
  if (batch_size < 1) embplan::detail::fail(field, batch_size, what);
}

// One CommCostNet from `file` (read from `src`): `in` inputs, `out` outputs
// (one per device).
inline nn::comm_cost_net import_comm_cost_net(io::safetensors_file file, const std::string& src,
                                              Eigen::Index in, Eigen::Index out,
                                              const std::vector<float>& means,
                                              const std::vector<float>& stds,
                                              const std::string& field,
                                              const std::string& in_what) {
  // CommCostModel.save() records its device count; exported, it is metadata.
  if (const auto it = file.metadata.find("ndevices"); it != file.metadata.end()) {
    const std::string key = src + ": metadata.ndevices";
    if (cost::detail::parse_number<Eigen::Index>(it->second, key) != out) {
      embplan::detail::fail(key, it->second,
                            std::to_string(out) + " devices, the backward net's input width");
    }
  }
  take_normalisation(file, src, means, stds, field + "_means", field + "_stds", in, in_what);
  const auto sizes = module_list_sizes(file, src, "hidden", in, in_what, "NeuroShard CommCostNet");
  if (sizes.back() != out) {
    const std::string last = "hidden." + std::to_string(sizes.size() - 2) + ".weight";
    embplan::detail::fail(src + ": tensors[\"" + last + "\"].shape",
                          shape_of(file.tensors.at(last)),
                          "[" + std::to_string(out) + ", " +
                              std::to_string(sizes[sizes.size() - 2]) + "] (one cost per device)");
  }
  nn::comm_cost_net_options arch;
  arch.features = in;
  arch.outputs = out;
  arch.hidden.assign(sizes.begin() + 1, sizes.end() - 1);
  nn::comm_cost_net net(arch);
  nn::load_state_dict(net, file);  // strict: names an extra or missing tensor
  return net;
}

}  // namespace detail

inline neural_cost import_neuroshard(const std::filesystem::path& path,
                                     const neuroshard_import_options& o) {
  auto file = io::read_safetensors(path);
  const std::string src = path.string();
  constexpr auto features = feature_set::neuroshard20;
  const auto f = static_cast<Eigen::Index>(feature_count(features));
  detail::require_batch_size("neuroshard_import.batch_size", o.batch_size,
                             "the positive batch size NeuroShard's costs were measured at");
  detail::take_normalisation(file, src, o.feature_means, o.feature_stds,
                             "neuroshard_import.feature_means", "neuroshard_import.feature_stds", f,
                             "feature set neuroshard20");
  constexpr const char* network = "NeuroShard ComputeCostNet";
  const auto table = detail::module_list_sizes(file, src, "t_hidden", f,
                                               "the 20 neuroshard20 table features", network);
  const auto pred = detail::module_list_sizes(file, src, "c_hidden", table.back(),
                                              "the table MLP's latent size", network);
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

// NeuroShard's forward and backward CommCostNet checkpoints (one file each)
// as a neural_comm for `devices` devices (the backward net's input width).
inline neural_comm import_neuroshard_comm(const std::filesystem::path& forward,
                                          const std::filesystem::path& backward,
                                          const neuroshard_comm_import_options& o) {
  detail::require_batch_size("neuroshard_comm_import.batch_size", o.batch_size,
                             "the positive global batch NeuroShard's all-to-alls were measured at");
  // The device count: a backward net reads one dim sum per device and prices
  // each device, so its first layer's width is its last layer's outputs.
  auto backward_file = io::read_safetensors(backward);
  const std::string backward_src = backward.string();
  const auto first = backward_file.tensors.find("hidden.0.weight");
  if (first == backward_file.tensors.end() || first->second.shape.size() != 2) {
    embplan::detail::fail(backward_src + ": tensors[\"hidden.0.weight\"]",
                          first == backward_file.tensors.end() ? std::string("(missing)")
                                                               : detail::shape_of(first->second),
                          "NeuroShard CommCostNet's first layer [out, devices]");
  }
  const auto width = static_cast<Eigen::Index>(first->second.shape[1]);
  const auto sizes = detail::module_list_sizes(backward_file, backward_src, "hidden", width,
                                               "one dim sum per device", "NeuroShard CommCostNet");
  if (sizes.back() != width) {
    embplan::detail::fail(backward_src + ": tensors[\"hidden.0.weight\"].shape",
                          detail::shape_of(first->second),
                          "[out, " + std::to_string(sizes.back()) +
                              "]: a backward CommCostNet has one input and one output per "
                              "device (a forward net reads twice its outputs)");
  }
  auto devices = static_cast<Eigen::Index>(o.devices);
  if (devices == 0) devices = width;
  if (width != devices || devices < 1) {
    embplan::detail::fail("neuroshard_comm_import.devices", o.devices,
                          "the backward net's input width, " + std::to_string(width) + " (" +
                              backward_src + " reads one dim sum per device)");
  }
  auto fwd = detail::import_comm_cost_net(
      io::read_safetensors(forward), forward.string(), 2 * devices, devices, o.forward_means,
      o.forward_stds, "neuroshard_comm_import.forward",
      std::to_string(2 * devices) + " forward features: dim sums, then sleep times");
  auto bwd = detail::import_comm_cost_net(
      std::move(backward_file), backward_src, devices, devices, o.backward_means, o.backward_stds,
      "neuroshard_comm_import.backward", std::to_string(devices) + " backward features: dim sums");
  neural_comm_metadata meta;
  meta.devices = static_cast<std::size_t>(devices);
  meta.meter = o.meter;
  meta.batch_size = o.batch_size;
  meta.trained_on = o.trained_on;
  meta.extra["imported_from"] = forward.string() + ", " + backward.string();
  return neural_comm(fwd, bwd, std::move(meta));
}

}  // namespace embplan::inline EMBPLAN_ABI::learn

#pragma once
// Models <-> safetensors, by PyTorch state_dict name (docs/learned-models.md,
// "Weights"): a checkpoint exported from the papers' PyTorch models (tools/
// export_state_dict.py) loads into the matching nn/ model, and a model saved
// here loads back into PyTorch with `load_state_dict`.
//
// load_state_dict checks, and names in its message:
// - missing and (in strict mode) unexpected tensor names, all listed at once;
// - shapes exactly as PyTorch's: a weight [out, in] (2-D even when out is 1),
//   a bias or other 1-D tensor [n] for a [1, n] matrix (nn/tensor.hpp);
// - dtype: a floating-point one (F32, F16, BF16, F64);
// - NaN / Inf, refused with the tensor name and the first bad entry.
// The model is only written once every check has passed.

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

namespace detail {

// The state_dict shape of a named matrix. PyTorch's weights ("weight",
// "weight_ih_l0", ...) are 2-D even with one output row ([1, 64]); every
// other [1, n] matrix (a bias, a feature mean) is a 1-D tensor [n].
inline std::vector<std::int64_t> state_shape(std::string_view name, const matrix& m) {
  const auto dot = name.rfind('.');
  const auto leaf = dot == std::string_view::npos ? name : name.substr(dot + 1);
  if (m.rows() == 1 && leaf.rfind("weight", 0) != 0) return {static_cast<std::int64_t>(m.cols())};
  return {static_cast<std::int64_t>(m.rows()), static_cast<std::int64_t>(m.cols())};
}

inline std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

inline bool floating(std::string_view dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64";
}

inline bool shape_matches(std::string_view name, const matrix& m,
                          const std::vector<std::int64_t>& shape) {
  return shape == state_shape(name, m);
}

}  // namespace detail

// Fills every tensor of named_tensors(m, prefix) from `file`. strict: a file
// tensor the model does not name is an error too (only those under `prefix`
// when a prefix is given, so one file may hold several models).
template <model M>
void load_state_dict(M& m, const io::safetensors_file& file, std::string_view prefix = {},
                     bool strict = true) {
  const std::string source = file.source.empty() ? std::string("<safetensors>") : file.source;
  auto targets = named_tensors(m, prefix);
  std::set<std::string> wanted;
  std::vector<std::string> missing;
  for (const auto& [name, p] : targets) {
    wanted.insert(name);
    if (file.tensors.find(name) == file.tensors.end()) missing.push_back(name);
  }
  std::vector<std::string> unexpected;
  if (strict) {
    const std::string under = prefix.empty() ? std::string() : std::string(prefix) + ".";
    for (const auto& [name, t] : file.tensors) {
      if (!under.empty() && name.rfind(under, 0) != 0) continue;
      if (wanted.count(name) == 0) unexpected.push_back(name);
    }
  }
  if (!missing.empty() || !unexpected.empty()) {
    auto list = [](const std::vector<std::string>& v) {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i)
        out += (i ? ", " : "") + v[i];
      return out + "]";
    };
    std::string msg = source + ": tensor names do not match the model";
    if (!missing.empty()) msg += "; missing " + list(missing);
    if (!unexpected.empty()) msg += "; unexpected " + list(unexpected);
    throw error(msg);
  }
  for (const auto& [name, p] : targets) {
    const io::tensor& t = file.tensors.at(name);
    const std::string field = source + ": tensors[\"" + name + "\"]";
    if (!detail::floating(t.dtype)) {
      embplan::detail::fail(field + ".dtype", t.dtype,
                            "a floating-point dtype (F32, F16, BF16, F64)");
    }
    if (!detail::shape_matches(name, *p, t.shape)) {
      embplan::detail::fail(field + ".shape", detail::shape_text(t.shape),
                            "shape " + detail::shape_text(detail::state_shape(name, *p)) +
                                " (the model's architecture)");
    }
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      if (!std::isfinite(t.values[i])) {
        embplan::detail::fail(field + "[" + std::to_string(i) + "]", t.values[i],
                              "a finite number");
      }
    }
  }
  for (auto& [name, p] : targets) {
    const io::tensor& t = file.tensors.at(name);
    *p = Eigen::Map<const matrix>(t.values.data(), p->rows(), p->cols());
  }
}

// Before a loader builds a net from sizes its file's metadata declares: each
// weight those sizes imply (mlp::weight_shapes) must be in `file` at that
// shape. The file's tensors are as large as the file, so a net that passes
// allocates no more than the file holds; one that does not is refused naming
// the metadata field and the sizes it declared (`field` = `declared`).
inline void require_declared_weights(
    const io::safetensors_file& file,
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& weights,
    std::string_view field, std::string_view declared) {
  for (const auto& [name, shape] : weights) {
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      embplan::detail::fail(field, declared,
                            "sizes the file's tensors hold (tensors[\"" + name + "\"], shape " +
                                detail::shape_text(shape) + ", is missing)");
    }
    if (it->second.shape != shape) {
      embplan::detail::fail(field, declared,
                            "sizes the file's tensors hold (tensors[\"" + name + "\"] has shape " +
                                detail::shape_text(it->second.shape) + ", not " +
                                detail::shape_text(shape) + ")");
    }
  }
}

template <model M>
void load_state_dict(M& m, const std::filesystem::path& path, std::string_view prefix = {},
                     bool strict = true) {
  load_state_dict(m, io::read_safetensors(path), prefix, strict);
}

// The model's tensors as a safetensors file (F32), with optional metadata.
template <model M>
io::safetensors_file state_dict(const M& m, std::string_view prefix = {},
                                std::map<std::string, std::string> metadata = {}) {
  io::safetensors_file out;
  out.metadata = std::move(metadata);
  for (const auto& [name, p] : named_tensors(m, prefix)) {
    io::tensor t;
    t.dtype = "F32";
    t.shape = detail::state_shape(name, *p);
    t.values.assign(p->data(), p->data() + p->size());
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

// What a file of embplan's models and policies holds, as a phrase for
// messages ("an AutoShard policy"): from its metadata ("embplan.policy",
// "embplan.kind") where it has them, else from its tensor names (a state_dict
// exported from the papers' models has no metadata); empty where neither
// tells.
inline std::string file_kind(const io::safetensors_file& file) {
  const auto meta = [&](const char* key) -> std::string {
    const auto it = file.metadata.find(key);
    return it == file.metadata.end() ? std::string() : it->second;
  };
  const auto has = [&](const char* name) { return file.tensors.count(name) > 0; };
  const auto policy = meta("embplan.policy");
  if (policy == "autoshard") return "an AutoShard policy";
  if (policy == "dreamshard") return "a DreamShard policy";
  const auto kind = meta("embplan.kind");
  if (kind == "compute_cost_net") return "a compute cost model";
  if (kind == "comm_cost_net") return "a communication cost model";
  if (kind == "dreamshard_model") return "a DreamShard cost model";
  if (!policy.empty() || !kind.empty()) return {};  // named, but not a kind known here
  if (has("a_fc_0.weight") && has("t_fc_0.weight")) return "an AutoShard policy";
  if (has("policy_net.weight")) return "a DreamShard policy";
  if (has("c_hidden.0.weight")) return "a compute cost model";
  if (has("forward.hidden.0.weight") || has("hidden.0.weight")) {
    return "a communication cost model";
  }
  return {};
}

// Refuses a file that is recognisably another kind (file_kind) than the
// `accepted` ones: "<source>: this is a DreamShard policy, expected an
// AutoShard policy" (`expected` says what was wanted). A file of no kind
// known here is left to the loader, which names the tensors it lacks.
inline void require_file_kind(const io::safetensors_file& file, const std::string& source,
                              std::string_view expected,
                              std::initializer_list<std::string_view> accepted) {
  const auto kind = file_kind(file);
  if (kind.empty()) return;
  for (const auto a : accepted)
    if (kind == a) return;
  throw error(source + ": this is " + kind + ", expected " + std::string(expected));
}

template <model M>
void save_state_dict(const std::filesystem::path& path, const M& m,
                     std::map<std::string, std::string> metadata = {}) {
  io::write_safetensors(path, state_dict(m, {}, std::move(metadata)));
}

}  // namespace embplan::inline EMBPLAN_ABI::nn

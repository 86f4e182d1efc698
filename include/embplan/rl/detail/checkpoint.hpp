#pragma once
// Training checkpoints' shared parts (rl/dreamshard_train.hpp,
// rl/autoshard_train.hpp): Adam's state as tensors and metadata, exact (F32
// moments, JSON step counts), written and read back for any nn::model.

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

namespace detail {

// Adam's state into a checkpoint: its moments as F32 tensors
// "adam.exp_avg.<parameter>" and "adam.exp_avg_sq.<parameter>" (none before
// the first step), its step counts as metadata "embplan.train.adam_steps" and
// "embplan.train.adam_parameter_steps" (JSON). `field` names the optimizer in
// the error for moments that do not match the model.
template <nn::model Model>
void mdp_put_adam_tensors(io::safetensors_file& file, const Model& model,
                          const nn::adam_state& adam, const std::string& field) {
  file.metadata["embplan.train.adam_steps"] = std::to_string(adam.steps);
  file.metadata["embplan.train.adam_parameter_steps"] = nlohmann::json(adam.parameter_steps).dump();
  if (adam.exp_avg.empty()) return;
  const auto params = model.named_parameters(std::string_view{});
  if (params.size() != adam.exp_avg.size()) {
    embplan::detail::fail(field, adam.exp_avg.size(),
                          std::to_string(params.size()) + " parameters, the model's");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& name = params[i].first;
    for (const auto& [key, m] : {std::pair{"adam.exp_avg.", &adam.exp_avg[i]},
                                 std::pair{"adam.exp_avg_sq.", &adam.exp_avg_sq[i]}}) {
      io::tensor t;
      t.dtype = "F32";
      t.shape = nn::detail::state_shape(name, *m);
      t.values.assign(m->data(), m->data() + m->size());
      file.tensors.emplace(key + name, std::move(t));
    }
  }
}

// The "adam.*" tensors, taken out of `file` (the model loads strictly from
// the rest).
inline std::map<std::string, io::tensor> mdp_take_adam_tensors(io::safetensors_file& file) {
  std::map<std::string, io::tensor> out;
  for (auto it = file.tensors.begin(); it != file.tensors.end();) {
    if (it->first.starts_with("adam.")) {
      out.insert(file.tensors.extract(it++));
    } else {
      ++it;
    }
  }
  return out;
}

// Adam's state for `model` from its tensors and the file's metadata. A file
// without "embplan.train.adam_steps" (written before Adam's state was kept)
// gives a fresh Adam.
template <nn::model Model>
nn::adam_state mdp_adam_state_from(const std::map<std::string, io::tensor>& tensors,
                                   const std::map<std::string, std::string>& metadata,
                                   const Model& model, const std::string& source) {
  nn::adam_state s;
  const auto steps = metadata.find("embplan.train.adam_steps");
  if (steps == metadata.end()) {
    if (!tensors.empty()) {
      embplan::detail::fail_missing(source + ": metadata.embplan.train.adam_steps",
                                    "Adam's step count, as the file holds Adam's moments");
    }
    return s;
  }
  s.steps = cost::detail::parse_number<std::int64_t>(
      steps->second, source + ": metadata.embplan.train.adam_steps");
  const std::string counts_field = source + ": metadata.embplan.train.adam_parameter_steps";
  const std::string& counts =
      cost::detail::require_key(metadata, source, "embplan.train.adam_parameter_steps",
                                "a checkpoint written by rl::save_checkpoint");
  try {
    // Strict (io/json_file.hpp): nothing after the array, a NUL included.
    s.parameter_steps = io::parse_json(counts, counts_field).get<std::vector<std::int64_t>>();
  } catch (const nlohmann::json::exception&) {
    embplan::detail::fail(counts_field, counts, "a JSON array of step counts");
  } catch (const embplan::error&) {
    embplan::detail::fail(counts_field, counts, "a JSON array of step counts");
  }
  const auto params = model.named_parameters(std::string_view{});
  if (!s.parameter_steps.empty() && s.parameter_steps.size() != params.size()) {
    embplan::detail::fail(counts_field, s.parameter_steps.size(),
                          std::to_string(params.size()) + " counts, one per model parameter");
  }
  const std::size_t expected = s.parameter_steps.empty() ? 0 : 2 * params.size();
  if (tensors.size() != expected) {
    embplan::detail::fail(source + ": tensors[\"adam.*\"].size", tensors.size(),
                          std::to_string(expected) + " (exp_avg and exp_avg_sq per parameter)");
  }
  if (expected == 0) return s;
  for (const auto& [name, p] : params) {
    for (const char* kind : {"adam.exp_avg.", "adam.exp_avg_sq."}) {
      const std::string key = kind + name;
      const std::string field = source + ": tensors[\"" + key + "\"]";
      const auto it = tensors.find(key);
      if (it == tensors.end()) embplan::detail::fail_missing(field, "Adam's moment of " + name);
      if (it->second.dtype != "F32") {
        embplan::detail::fail(field + ".dtype", it->second.dtype, "F32 (Adam's moments, exact)");
      }
      if (!nn::detail::shape_matches(name, *p, it->second.shape)) {
        embplan::detail::fail(
            field + ".shape", nn::detail::shape_text(it->second.shape),
            nn::detail::shape_text(nn::detail::state_shape(name, *p)) + ", the parameter's");
      }
      (std::string_view(kind) == "adam.exp_avg." ? s.exp_avg : s.exp_avg_sq)
          .push_back(Eigen::Map<const nn::matrix>(it->second.values.data(), p->rows(), p->cols()));
    }
  }
  return s;
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::rl

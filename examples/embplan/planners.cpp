// The planner names and runs of `embplan plan` and `compare` (planners.hpp).
#include "planners.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/core/error.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/run_preset.hpp"

namespace embplan_cli {

namespace {

using embplan::presets::rowwise_prefix;

bool is_preset(std::string_view name) {
  for (const auto n : embplan::preset_names())
    if (n == name) return true;
  return false;
}

template <class Model>
planned run_with(const std::string& name, const embplan::task& t, std::uint64_t seed,
                 const Model& model, const embplan::preset_models& models,
                 const embplan::table_rules& rules, const embplan::stage::stage_settings& stages) {
  auto r = embplan::run_preset(name, t, seed, model, models, rules, stages);
  planned out;
  out.ok = r.ok;
  out.failure = std::move(r.failure);
  out.placement = std::move(r.placement);
  out.search_ms = r.sharding_ms;
  out.cache_lookups = r.cache_lookups;
  out.cache_hits = r.cache_hits;
  out.made_by = std::move(r.made_by);
  return out;
}

std::string gib_text(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f GiB",
                static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << 30));
  return buf;
}

}  // namespace

std::vector<std::string> planner_names() {
  std::vector<std::string> out;
  for (const auto n : embplan::preset_names())
    out.emplace_back(n);
  return out;
}

std::string planner_list() {
  std::string out;
  for (const auto n : embplan::preset_names())
    out += (out.empty() ? "" : ", ") + std::string(n);
  return out +
         " (each also prefixed rowwise_, e.g. rowwise_lookup_greedy: tables that fit no "
         "device split by rows)";
}

std::string parse_planner(const std::string& name, std::string_view flag) {
  const std::string_view view = name;
  const std::string_view base =
      view.starts_with(rowwise_prefix) ? view.substr(rowwise_prefix.size()) : view;
  if (!is_preset(base)) embplan::detail::fail(flag, name, "one of " + planner_list());
  return name;
}

bool is_dreamshard(std::string_view name) {
  return name == "dreamshard" || name == std::string(rowwise_prefix) + "dreamshard";
}

bool is_autoshard(std::string_view name) {
  return name == "autoshard" || name == std::string(rowwise_prefix) + "autoshard";
}

bool is_rowwise(std::string_view name) {
  return name.starts_with(rowwise_prefix);
}

void check_none_or_auto(std::string_view flag, const std::string& value) {
  if (value != "none" && value != "auto")
    embplan::detail::fail(flag, value, "\"none\" or \"auto\"");
}

planned run_planner(const std::string& name, const embplan::task& t, std::uint64_t seed,
                    const planning_model& pm, const embplan::table_rules& rules,
                    const embplan::stage::stage_settings& stages) {
  // Without a policy only its planner fails; the reason names the paths tried.
  if (is_dreamshard(name) && !pm.policy) {
    planned out;
    out.failure = pm.policy_text;
    return out;
  }
  if (is_autoshard(name) && !pm.autoshard) {
    planned out;
    out.failure = pm.autoshard_text;
    return out;
  }
  const embplan::preset_models models{
      .dreamshard = pm.policy ? embplan::rl::dreamshard_preset(*pm.policy) : embplan::preset_fn{},
      .autoshard =
          pm.autoshard ? embplan::rl::autoshard_preset(*pm.autoshard) : embplan::preset_fn{}};
  if (pm.compute) {
    return run_with(name, t, seed, *pm.compute, models, rules, stages);
  }
  return run_with(name, t, seed, embplan::analytic_cost{}, models, rules, stages);
}

std::size_t oversized_tables(const embplan::task& t) {
  std::uint64_t largest = 0;
  for (const auto& d : t.cluster.devices)
    largest = std::max(largest, d.memory_bytes);
  std::size_t n = 0;
  for (const auto& spec : t.tables)
    n += embplan::table_bytes(spec, t.optimizer_state) > largest ? 1 : 0;
  return n;
}

std::string rowwise_hint(const std::string& planner) {
  const std::string_view view = planner;
  const std::string base =
      std::string(view.starts_with(rowwise_prefix) ? view.substr(rowwise_prefix.size()) : view);
  const std::string examples = base == "torchrec_like"
                                   ? "rowwise_torchrec_like"
                                   : "rowwise_" + base + " or rowwise_torchrec_like";
  return "try a rowwise_ planner (e.g. " + examples +
         "), which splits a table that fits no device by rows";
}

void check_dim_multiple(std::span<const embplan::table_spec> tables, std::string_view where) {
  const std::int32_t multiple = embplan::dim_multiple{}.multiple;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    if (tables[i].dim % multiple == 0) continue;
    const std::string field = std::string(where) + "[" + std::to_string(i) + "].dim";
    embplan::detail::fail(field, tables[i].dim,
                          "a multiple of " + std::to_string(multiple) + " for table " +
                              std::to_string(i) + " '" + tables[i].name +
                              "' (every planner places pieces of a multiple of " +
                              std::to_string(multiple) + " columns)");
  }
}

std::string failure_text(const std::string& planner, const std::string& failure,
                         const embplan::task& t) {
  // "<digits> bytes" -> "<x.xxx> GiB"
  std::string out;
  constexpr std::string_view unit = " bytes";
  std::size_t i = 0;
  while (i < failure.size()) {
    if (std::isdigit(static_cast<unsigned char>(failure[i])) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(failure[i - 1])))) {
      std::size_t j = i;
      while (j < failure.size() && std::isdigit(static_cast<unsigned char>(failure[j])))
        ++j;
      if (std::string_view(failure).substr(j, unit.size()) == unit) {
        out += gib_text(std::stoull(failure.substr(i, j - i)));
        i = j + unit.size();
        continue;
      }
      out.append(failure, i, j - i);
      i = j;
      continue;
    }
    out += failure[i++];
  }
  if (oversized_tables(t) > 0 && !std::string_view(planner).starts_with(rowwise_prefix)) {
    out += "; " + rowwise_hint(planner);
  }
  return out;
}

}  // namespace embplan_cli

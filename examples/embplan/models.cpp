// The planning model and the meter of `embplan plan` and `compare` (models.hpp).
#include "models.hpp"

#include <cmath>
#include <system_error>

#include "embplan/cost/analytic.hpp"
#include "embplan/cost/torchrec_cost.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "text_table.hpp"

namespace embplan_cli {

namespace {

constexpr const char* bundled_model_file = "cost/cpu_compute_model.safetensors";
constexpr const char* bundled_policy_file = "rl/dreamshard_cpu_4dev.safetensors";
constexpr const char* bundled_autoshard_file = "rl/autoshard_cpu_8dev.safetensors";

// The install prefix of the running executable: <prefix>/<bindir>/embplan.
std::filesystem::path install_prefix() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  auto prefix = exe.parent_path();
  for (const auto& part : std::filesystem::path(EMBPLAN_INSTALL_BINDIR)) {
    if (!part.empty()) prefix = prefix.parent_path();
  }
  return prefix;
}

constexpr const char* analytic_meter_text = "analytic cost model (bandwidth roofline + all-to-all)";
constexpr const char* torchrec_meter_text =
    "TorchRec v0.3.2's perf estimator (EmbeddingPerfEstimator: each shard's compute and "
    "all-to-all at TorchRec's V100-era constants; a device the sum, the plan the max: "
    "NoopPerfModel)";
constexpr const char* learned_meter_text =
    "the learned compute model (see planning model) + the analytic all-to-all model";
constexpr const char* measured_meter_text =
    "CPU meter (each device's shard run as one fused embedding bag and timed, "
    "AutoShard protocol); communication from the analytic all-to-all model";

// Next to an installed CLI, then in the source tree (models.hpp).
std::vector<std::filesystem::path> bundled_candidates(std::string_view file) {
  std::vector<std::filesystem::path> out;
  if (const auto prefix = install_prefix(); !prefix.empty()) {
    out.push_back(prefix / EMBPLAN_INSTALL_DATADIR / file);
  }
  out.push_back(std::filesystem::path(EMBPLAN_SOURCE_DATADIR) / file);
  return out;
}

// The first candidate that exists, else empty and `tried` lists them all.
std::filesystem::path first_existing(const std::vector<std::filesystem::path>& candidates,
                                     std::string& tried) {
  for (const auto& candidate : candidates) {
    if (std::filesystem::exists(candidate)) return candidate;
    tried += (tried.empty() ? "'" : " or '") + candidate.string() + "'";
  }
  return {};
}

// The file of a policy flag: `arg`, or the first bundled candidate when `arg`
// is empty. Empty when no bundled one exists (`missing` says where it was
// looked for); a named file that does not exist is an error naming the flag.
std::filesystem::path policy_path(const std::string& arg,
                                  const std::vector<std::filesystem::path>& candidates,
                                  const char* flag, const char* system, const char* display,
                                  std::string& missing) {
  const std::string trainer = std::string("embplan train ") + system;
  if (arg.empty()) {
    std::string tried;
    auto path = first_existing(candidates, tried);
    if (path.empty()) {
      missing = std::string("no ") + display + " policy: the bundled policy is not at " + tried +
                " (give " + flag + " FILE, a file of `" + trainer + "`)";
    }
    return path;
  }
  if (!std::filesystem::exists(arg)) {
    embplan::detail::fail(flag, arg, "a policy file (" + trainer + ")");
  }
  return arg;
}

}  // namespace

void load_policy(planning_model& pm, const std::string& arg, std::string_view bundled_file) {
  const auto path = policy_path(
      arg, bundled_candidates(bundled_file.empty() ? bundled_policy_file : bundled_file),
      "--policy", "dreamshard", "DreamShard", pm.policy_text);
  if (path.empty()) {
    pm.policy = nullptr;
    return;
  }
  auto policy = std::make_shared<const embplan::rl::dreamshard_policy>(
      embplan::rl::dreamshard_policy::load(path));
  const auto& m = policy->metadata();
  std::string text = (arg.empty() ? "bundled " : "") + path.filename().string() + " (" +
                     std::string(embplan::to_string(m.cost.features)) + " features, " +
                     m.cost.meter + " meter, trained on: " + m.cost.trained_on;
  if (!m.cost.pool_half.empty()) {
    text += ", " + m.cost.pool_half + " half of the pool (split seed " +
            std::to_string(m.cost.split_seed) + ")";
  }
  pm.policy = std::move(policy);
  pm.policy_text = text + ")";
}

std::vector<std::filesystem::path> bundled_autoshard_policy_candidates() {
  return bundled_candidates(bundled_autoshard_file);
}

void load_autoshard_policy(planning_model& pm, const std::string& arg) {
  const auto path = policy_path(arg, bundled_autoshard_policy_candidates(), "--autoshard-policy",
                                "autoshard", "AutoShard", pm.autoshard_text);
  if (path.empty()) {
    pm.autoshard = nullptr;
    return;
  }
  auto policy = std::make_shared<const embplan::rl::autoshard_policy>(
      embplan::rl::autoshard_policy::load(path));
  const auto& m = policy->metadata();
  const auto hp = [&](const char* key) {
    const auto it = m.hyperparameters.find(key);
    return it == m.hyperparameters.end() ? std::string("?") : it->second;
  };
  std::string text = (arg.empty() ? "bundled " : "") + path.filename().string() + " (" + m.meter +
                     " meter, " + hp("updates_done") + " updates, trained on: " + hp("trained_on");
  if (const auto half = hp("pool_half"); half != "?" && half != "whole") {
    text += ", " + half + " half of the pool (split seed " + hp("split_seed") + ")";
  }
  pm.autoshard = std::move(policy);
  pm.autoshard_text = text + ")";
}

planning_model load_planning_model(const std::string& arg, std::string_view bundled_file) {
  if (arg == "none") return {std::nullopt, "none: neuroshard plans on the analytic model"};
  const bool bundled = arg.empty();
  std::filesystem::path path = arg;
  if (bundled) {
    std::string tried;
    path = first_existing(
        bundled_candidates(bundled_file.empty() ? bundled_model_file : bundled_file), tried);
    if (path.empty()) {
      return {std::nullopt,
              "the bundled model is not at " + tried + ": neuroshard plans on the analytic model"};
    }
  }
  if (!std::filesystem::exists(path)) {
    embplan::detail::fail("--model", arg, "a neural_cost file (embplan train compute) or none");
  }
  auto model = embplan::neural_cost::load(path);
  const auto& m = model.metadata();
  std::string text = (bundled ? "bundled " : "") + path.filename().string() + " (" +
                     std::string(embplan::to_string(m.features)) + " features, " + m.meter +
                     " meter at batch " + std::to_string(m.batch_size) +
                     ", trained on: " + m.trained_on + ")";
  return {std::move(model), std::move(text)};
}

void check_meter(const meter_args& m, bool dreamshard) {
  if (m.name == "dreamshard" && !dreamshard) {
    embplan::detail::fail("--meter", m.name,
                          "simulated, analytic, torchrec or measured (dreamshard: in compare "
                          "only)");
  }
  if (m.name != "simulated" && m.name != "analytic" && m.name != "torchrec" &&
      m.name != "measured" && m.name != "dreamshard" && (m.own.empty() || m.name != m.own)) {
    std::string known = dreamshard ? "simulated, analytic, torchrec, measured, dreamshard"
                                   : "simulated, analytic, torchrec, measured";
    if (!m.own.empty()) known += ", " + m.own;
    const auto last = known.rfind(", ");
    embplan::detail::fail("--meter", m.name, known.replace(last, 2, " or "));
  }
  if (!(m.reference_ms >= 0.0) || !std::isfinite(m.reference_ms)) {
    embplan::detail::fail("--reference-ms", m.reference_ms,
                          "a finite time >= 0 (0: measured, with --reference)");
  }
  if ((m.reference || m.reference_ms > 0.0) && m.name != "measured") {
    embplan::detail::fail("--meter", m.name,
                          "\"measured\" with --reference (the drift reference scales the CPU "
                          "meter)");
  }
  if (m.batch != 0 && m.name != "measured") {
    embplan::detail::fail("--meter", m.name,
                          "\"measured\" with --meter-batch (the CPU meter's batch)");
  }
  if (m.flush_mib != 0 && m.name != "measured") {
    embplan::detail::fail("--meter", m.name,
                          "\"measured\" with --flush-mib (the CPU meter's cache flush)");
  }
}

std::int64_t measured_batch(const meter_args& m, const planning_model& pm) {
  if (m.batch > 0) return m.batch;
  if (pm.compute && pm.compute->metadata().meter == "cpu") return pm.compute->metadata().batch_size;
  return embplan::meter::meter_options{}.batch_size;
}

meter_choice meter_of(const meter_args& m, const planning_model& pm, const program_meter* own) {
  check_meter(m, /*dreamshard=*/true);
  if (!m.own.empty() && m.name == m.own) {
    if (!own || !own->make) embplan::detail::fail("--meter", m.name, "a meter this program has");
    return own->make();
  }
  if (m.name == "dreamshard") {
    if (!pm.policy)
      embplan::detail::fail("--meter", m.name, "a DreamShard policy: " + pm.policy_text);
    const auto policy = pm.policy;  // shared: the meter keeps it alive
    return {any_meter(policy->cost_model()),
            "DreamShard's cost network of the policy (" + pm.policy_text +
                "): a plan's cost is its overall head (the estimated MDP's cost, DreamShard "
                "§3.2); balance from its per-device heads; no lower bound",
            [policy](const embplan::task& t, const embplan::plan& p) {
              return policy->cost_model().overall_ms(t, p);
            }};
  }
  if (m.name == "measured") {
    embplan::meter::cpu_meter_cost meter;
    meter.options.batch_size = measured_batch(m, pm);
    meter.options.flush_bytes = flush_bytes_of(m.flush_mib);
    const std::string text = std::string(measured_meter_text) + "; " +
                             std::to_string(meter.options.batch_size) +
                             " bags per table per run, times scaled to the task's batch";
    if (!m.reference && m.reference_ms == 0.0) return {any_meter(meter), text};
    meter.options.reference = true;
    meter.options.reference_ms =
        m.reference_ms > 0.0 ? m.reference_ms : embplan::meter::calibrate_reference(meter.options);
    return {any_meter(meter), text +
                                  "; drift reference: times scaled to the machine state where "
                                  "the reference shard takes " +
                                  fixed(meter.options.reference_ms, 3) + " ms"};
  }
  if (m.name == "torchrec") return {any_meter(embplan::torchrec_cost{}), torchrec_meter_text};
  if (m.name == "simulated" && pm.compute) return {any_meter(*pm.compute), learned_meter_text};
  return {any_meter(embplan::analytic_cost{}), analytic_meter_text};
}

}  // namespace embplan_cli

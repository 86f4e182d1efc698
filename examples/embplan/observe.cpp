// `embplan observe` on the CPU meter (observe.hpp).
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.hpp"
#include "embplan/core/error.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "observe.hpp"

namespace embplan_cli {

namespace {

int run_observe(const observe_args& a) {
  if (a.repeats < 2) embplan::detail::fail("observe.repeats", a.repeats, "a count >= 2");
  if (a.repeatability) return run_repeatability(a);
  validate(a);
  if (a.max_weight_mib < 1) {
    embplan::detail::fail("observe.max_weight_mib", a.max_weight_mib, "at least 1");
  }
  embplan::meter::shard_meter meter(
      observe_meter_options(a, static_cast<std::uint64_t>(a.max_weight_mib) << 20, a.separate));
  return run_observations(a, meter, "CPU meter");
}

}  // namespace

command add_observe(CLI::App& app) {
  auto a = std::make_shared<observe_args>();
  auto* sub =
      app.add_subcommand("observe", "Measure the papers' three cost observations on the CPU meter");
  add_observe_options(sub, *a);
  sub->add_flag("--repeatability", a->repeatability,
                "only (0): CV of --repeats measurements of one 10-table shard under six "
                "meter configurations (wall / thread CPU clock; protocol / median of 3 / "
                "drift reference)");
  add_real_option(sub, "--reference-ms", a->reference_ms,
                  "--repeatability: the drift-reference rows' reference time (default: "
                  "each meter measures it at its start)",
                  0, 1e6);
  sub->add_flag("--separate", a->separate,
                "(1): also time forward and backward alone, and compare each fused with "
                "its sum (three times the measuring)");
  add_int_option(sub, "--max-weight-mib", a->max_weight_mib,
                 "largest shard materialised, MiB (rows scaled down to fit)", 1, 1 << 20)
      ->capture_default_str();
  add_flush_option(sub, a->flush_mib, "");
  return {sub, [a] { return run_observe(*a); }};
}

}  // namespace embplan_cli

// libFuzzer harness: user constraints JSON (io/json_constraints.hpp), as
// `embplan plan --constraints` reads it, for a fixed task of six tables
// t0..t5 on four devices in two hosts (its dtypes applied, as there). What is
// accepted is planned with the table-wise greedy and embplan's column beam
// search, each through default_constraint with the rules; a plan either planner returns must pass
// check_plan under the same rules (the rules hold for every plan that leaves
// a planner), and a failure must say why.

#include <stdexcept>
#include <string>

#include "embplan/check_plan.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/io/json_constraints.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/presets.hpp"
#include "fuzz_support.hpp"

namespace {

// Six tables of 8-32 columns and 1,000-4,000 rows (32-512 KB in fp32); four
// devices of 1 MiB, two per host: room for every table, not for all on one.
const embplan::task& six_tables() {
  static const embplan::task t = [] {
    embplan::task out;
    for (int i = 0; i < 6; ++i) {
      embplan::table_spec s;
      s.name = "t" + std::to_string(i);
      s.rows = 1000 * (1 + i % 4);
      s.dim = 8 << (i % 3);
      s.pooling_factor = 1.0 + i;
      s.reuse_hist[0] = 0.5;
      s.reuse_hist[3] = 0.5;
      out.tables.push_back(s);
    }
    embplan::device_spec d;
    d.memory_bytes = std::uint64_t{1} << 20;
    out.cluster = embplan::uniform_topology(4, d, 2);
    out.batch_size = 512;
    return out;
  }();
  return t;
}

template <class Planner>
void plan_and_check(const embplan::task& t, const embplan::default_constraint& rule,
                    const Planner& p, const char* what) {
  const auto r = p(t, 0);
  if (!r.ok) {
    if (r.failure.empty()) throw std::logic_error(std::string(what) + ": failed without a reason");
    return;
  }
  if (!embplan::check_plan(t, r.placement, rule).empty())
    throw std::logic_error(std::string(what) + ": returned a plan its constraints refuse");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  embplan::fuzz::expect_only_embplan_errors([&] {
    auto t = six_tables();
    const auto j = embplan::io::parse_json(embplan::fuzz::as_text(data, size), "constraints.json");
    const auto c = embplan::io::user_constraints_from_json(j, t);
    embplan::apply_table_rules(t, c);  // as `plan --constraints` does
    const embplan::default_constraint rule{embplan::memory_capacity{}, embplan::dim_multiple{},
                                           embplan::table_rules(t, c)};
    plan_and_check(t, rule, embplan::lookup_greedy_planner({}, {}, rule, {}), "lookup_greedy");
    plan_and_check(t, rule, embplan::neuroshard_plus_planner({}, {}, rule, {}), "neuroshard_plus");
  });
  return 0;
}

// docs/extending.md, "Writing your own Constraint": pin a table to a device,
// and keep memory free on every device (the optional bytes-aware overload).
// Plans a small task with the pin under two searchers and checks that every
// piece of the pinned table sits on its device; exits non-zero otherwise.

#include <embplan/core.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

// [extending.md: pin_table]
// Every piece of table `table` goes to device `device`; other tables anywhere.
struct pin_table {
  std::uint32_t table = 0;
  std::uint32_t device = 0;

  bool admits(const embplan::task& t, const embplan::placement_state&,
              const embplan::shard& s) const {
    // A pin the task cannot satisfy is a mistake in the input, not a refusal:
    // say so, the way embplan's own messages do.
    if (table >= t.tables.size() || device >= t.cluster.size()) {
      throw embplan::error("pin_table{" + std::to_string(table) + ", " + std::to_string(device) +
                           "}: expected a table index below " + std::to_string(t.tables.size()) +
                           " and a device index below " + std::to_string(t.cluster.size()));
    }
    return s.table != table || s.device == device;
  }

  std::string describe() const {
    return "table " + std::to_string(table) + " pinned to device " + std::to_string(device);
  }
};
static_assert(embplan::constraint<pin_table>);
// [end]

// [extending.md: memory_headroom]
// Keeps `reserve_bytes` free on every device (activations, buffers).
struct memory_headroom {
  std::uint64_t reserve_bytes = 0;

  bool admits(const embplan::task& t, const embplan::placement_state& st,
              const embplan::shard& s) const {
    return admits(t, st, s, embplan::shard_bytes(t, s));
  }

  // Optional: the same answer, with bytes == shard_bytes(t, s) given by a
  // caller that already knows them (bytes_aware_constraint).
  bool admits(const embplan::task& t, const embplan::placement_state& st, const embplan::shard& s,
              std::uint64_t bytes) const {
    const std::uint64_t capacity = t.cluster.devices[s.device].memory_bytes;
    const std::uint64_t used = st.memory_bytes[s.device];
    // used + bytes + reserve <= capacity, written so that nothing wraps.
    return reserve_bytes <= capacity && used <= capacity - reserve_bytes &&
           bytes <= capacity - reserve_bytes - used;
  }

  std::string describe() const {
    return "memory capacity less " + std::to_string(reserve_bytes) + " bytes kept free";
  }
};
static_assert(embplan::bytes_aware_constraint<memory_headroom>);
// [end]

namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

// 16 tables of 8 MB to 256 MB on 4 devices of 1 GiB.
embplan::task small_task() {
  embplan::task t;
  t.name = "own_constraint";
  t.cluster = embplan::uniform_topology(4, embplan::device_spec{.memory_bytes = embplan::gib});
  for (int i = 0; i < 16; ++i) {
    embplan::table_spec spec;
    spec.name = "t" + std::to_string(i);
    spec.rows = 250'000 * (1 + i % 4);
    spec.dim = 8 << (i % 4);
    spec.pooling_factor = 1.0 + i % 7;
    spec.reuse_hist[0] = 1.0;
    t.tables.push_back(spec);
  }
  return t;
}

template <class Planner>
bool honours_pin(const char* what, const Planner& planner, const embplan::task& t,
                 const pin_table& pin, std::uint64_t reserve_bytes) {
  const embplan::plan_result r = planner(t, 0);
  if (!r.ok) {
    std::fprintf(stderr, "%s: no plan: %s\n", what, r.failure.c_str());
    return false;
  }
  embplan::validate(t, r.placement);
  for (const embplan::shard& s : r.placement.shards) {
    if (s.table == pin.table && s.device != pin.device) {
      std::fprintf(stderr, "%s: table %u on device %u\n", what, s.table, s.device);
      return false;
    }
  }
  for (std::size_t d = 0; d < t.cluster.size(); ++d) {
    if (r.cost_ms.memory_bytes[d] + reserve_bytes > t.cluster.devices[d].memory_bytes) {
      std::fprintf(stderr, "%s: device %zu keeps less than the reserve free\n", what, d);
      return false;
    }
  }
  std::printf("%s: %zu shards, %.3f ms (%s), table %u on device %u\n", what,
              r.placement.shards.size(), r.cost_ms.max_ms(), r.meter.c_str(), pin.table,
              pin.device);
  return true;
}

}  // namespace

int main() {
  const embplan::task t = small_task();

  // [extending.md: compose_constraint]
  using rule = embplan::all_of<memory_headroom, embplan::dim_multiple, pin_table>;
  const rule pinned{memory_headroom{.reserve_bytes = 64 * mib}, embplan::dim_multiple{},
                    pin_table{.table = 3, .device = 2}};
  const embplan::planner<embplan::analytic_cost, embplan::sorted_greedy, rule,
                         embplan::neg_max_cost_reward>
      greedy{{}, {}, pinned, {}};
  // The searcher that splits tables by columns: every piece is asked about.
  const embplan::planner<embplan::analytic_cost, embplan::column_beam, rule,
                         embplan::neg_max_cost_reward>
      beam{{}, {}, pinned, {}};
  // [end]

  const pin_table pin{.table = 3, .device = 2};
  if (!honours_pin("sorted_greedy", greedy, t, pin, 64 * mib)) return 1;
  if (!honours_pin("column_beam", beam, t, pin, 64 * mib)) return 1;

  // A pin that cannot be met is an infeasible task: the result says which
  // table fits nowhere and under which rule.
  embplan::task cramped = t;
  cramped.cluster.devices[2].memory_bytes = 128 * mib;  // table 3 holds 256 MB
  const embplan::plan_result none = greedy(cramped, 0);
  if (none.ok || none.failure.find("table 3 pinned to device 2") == std::string::npos) {
    std::fprintf(stderr, "cramped: expected a failure naming the pin, got '%s'\n",
                 none.failure.c_str());
    return 1;
  }
  std::printf("cramped: %s\n", none.failure.c_str());

  // A pin naming a device the task does not have is an error in the input.
  const embplan::planner<embplan::analytic_cost, embplan::sorted_greedy, rule,
                         embplan::neg_max_cost_reward>
      wrong{{}, {}, rule{memory_headroom{}, embplan::dim_multiple{}, pin_table{3, 7}}, {}};
  try {
    (void)wrong(t, 0);
    std::fprintf(stderr, "pin to device 7 of 4: expected embplan::error\n");
    return 1;
  } catch (const embplan::error& e) {
    std::printf("pin to device 7: %s\n", e.what());
  }
  return 0;
}

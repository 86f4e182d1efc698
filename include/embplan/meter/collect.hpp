#pragma once
// Cost-data collection, NeuroShard's data generation (MLSys'23 §3.1, App. B):
//   Algorithm 3  table augmentation: every pool table at every dim of a list;
//   Algorithm 4  random table combinations of T_min..T_max augmented tables,
//                whose fused compute cost the meter measures;
//   Algorithm 5  random placements of N_place augmented tables on D devices
//                (sorted by dim, each to the least-dim legal device with
//                probability p, else to a random legal one; p ~ U[0,1] per
//                placement) with random start times in [0, max_start_ms] per
//                device, whose all-to-all costs the comm meter measures;
//                a table that fits no device is left out.
// Sample i is drawn from rng(derive_seed(seed, i)) alone, so any process can
// make any sample: ranks split the ids, a resumed run skips the ids on file.
//
// Records are JSON lines (one object per sample), documented in
// docs/measuring.md ("Cost data"): compute records carry tables, dims and forward/backward/total
// ms; comm records carry the placement, dim sums, start times and per-device
// forward/backward ms. Every record names its meter and batch size.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/io/detail/input_guard.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter {

// An augmented table (Algorithm 3): pool table `table` at dimension `dim`.
struct augmented_table {
  std::size_t table = 0;
  std::int32_t dim = 0;
  friend bool operator==(const augmented_table&, const augmented_table&) = default;
};

struct collect_options {
  std::vector<std::int32_t> dims{4, 8, 16, 32, 64, 128};  // NeuroShard §4 "Implementation details"
  std::int32_t min_tables = 1;                            // Algorithm 4: 1..15 tables
  std::int32_t max_tables = 15;
  std::int32_t devices = 4;     // Algorithm 5
  std::int32_t min_place = 10;  // 10..60 tables for 4 GPUs
  std::int32_t max_place = 60;
  double max_start_ms = 20.0;  // start times in [0, 20] ms
  std::uint64_t device_memory_bytes = std::uint64_t{4} << 30;
  std::uint64_t seed = 0;
};

inline void validate(const collect_options& o, std::size_t pool_size) {
  if (pool_size == 0) embplan::detail::fail("collect.pool.size", 0, "at least one table");
  if (o.dims.empty()) embplan::detail::fail("collect.dims", "[]", "at least one dimension");
  for (std::size_t i = 0; i < o.dims.size(); ++i) {
    // The planners place only pieces of a multiple of 4 columns
    // (constraint/dim_multiple.hpp), so a model is never asked to price another dim.
    if (o.dims[i] <= 0 || o.dims[i] % 4 != 0) {
      embplan::detail::fail("collect.dims[" + std::to_string(i) + "]", o.dims[i],
                            "a positive multiple of 4");
    }
  }
  const auto augmented = pool_size * o.dims.size();
  if (o.min_tables < 1) embplan::detail::fail("collect.min_tables", o.min_tables, "a count >= 1");
  if (o.max_tables < o.min_tables || static_cast<std::size_t>(o.max_tables) > augmented) {
    embplan::detail::fail("collect.max_tables", o.max_tables,
                          "between min_tables (" + std::to_string(o.min_tables) +
                              ") and the augmented pool's size (" + std::to_string(augmented) +
                              ")");
  }
  if (o.devices < 1) embplan::detail::fail("collect.devices", o.devices, "a count >= 1");
  if (o.min_place < 1) embplan::detail::fail("collect.min_place", o.min_place, "a count >= 1");
  if (o.max_place < o.min_place || static_cast<std::size_t>(o.max_place) > augmented) {
    embplan::detail::fail("collect.max_place", o.max_place,
                          "between min_place (" + std::to_string(o.min_place) +
                              ") and the augmented pool's size (" + std::to_string(augmented) +
                              ")");
  }
  if (!(o.max_start_ms >= 0.0)) {
    embplan::detail::fail("collect.max_start_ms", o.max_start_ms, "a finite number >= 0");
  }
}

// Algorithm 3: pool-major, dims in the given order.
inline std::vector<augmented_table> augment(std::size_t pool_size,
                                            std::span<const std::int32_t> dims) {
  std::vector<augmented_table> out;
  out.reserve(pool_size * dims.size());
  for (std::size_t t = 0; t < pool_size; ++t)
    for (const auto d : dims)
      out.push_back({t, d});
  return out;
}

namespace detail {
// k distinct draws from [0, n) in draw order (Floyd would lose the order;
// a partial Fisher-Yates over an index map keeps memory O(k)).
inline std::vector<std::size_t> sample_distinct(rng& gen, std::size_t n, std::size_t k) {
  std::vector<std::pair<std::size_t, std::size_t>> swapped;  // position -> value, sparse
  const auto value_at = [&](std::size_t i) {
    for (const auto& [pos, val] : swapped)
      if (pos == i) return val;
    return i;
  };
  const auto set_at = [&](std::size_t i, std::size_t v) {
    for (auto& [pos, val] : swapped)
      if (pos == i) {
        val = v;
        return;
      }
    swapped.emplace_back(i, v);
  };
  std::vector<std::size_t> out;
  out.reserve(k);
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(gen.below(n - i));
    const std::size_t vi = value_at(i);
    const std::size_t vj = value_at(j);
    set_at(j, vi);
    set_at(i, vj);
    out.push_back(vj);
  }
  return out;
}
}  // namespace detail

struct compute_sample {
  std::int64_t id = 0;
  std::vector<augmented_table> tables{};
};

// Algorithm 4, one combination: T ~ U{min_tables..max_tables}, T distinct
// augmented tables.
inline compute_sample make_compute_sample(std::span<const augmented_table> augmented,
                                          const collect_options& o, std::int64_t id) {
  rng gen(derive_seed(o.seed, static_cast<std::uint64_t>(id)));
  const auto count = static_cast<std::size_t>(gen.between(o.min_tables, o.max_tables));
  compute_sample s{.id = id, .tables = {}};
  for (const auto i : detail::sample_distinct(gen, augmented.size(), count))
    s.tables.push_back(augmented[i]);
  return s;
}

// The table specs a sample runs: pool tables at the sample's dims.
inline std::vector<table_spec> sample_specs(std::span<const table_spec> pool,
                                            std::span<const augmented_table> tables) {
  std::vector<table_spec> out;
  out.reserve(tables.size());
  for (const auto& a : tables) {
    table_spec t = pool[a.table];
    t.dim = a.dim;
    out.push_back(std::move(t));
  }
  return out;
}

struct placement_sample {
  std::int64_t id = 0;
  std::vector<augmented_table> tables{};  // sorted by dim, descending
  std::vector<std::int32_t> device_of{};  // per table
  std::vector<std::int64_t> dim_sum{};    // per device
  std::vector<double> start_ms{};         // per device
  double greedy_probability = 0.0;        // p
};

// Algorithm 5, one placement. Line 10 keeps the devices a table fits on; a
// table that fits on none (a 12.5M-row table at dim 128 is 6.4 GB) is left
// out of the placement, so `tables` may hold fewer than were drawn. A draw
// that places no table at all is an error.
inline placement_sample make_placement_sample(std::span<const table_spec> pool,
                                              std::span<const augmented_table> augmented,
                                              const collect_options& o, std::int64_t id) {
  const auto devices = static_cast<std::size_t>(o.devices);
  rng gen(derive_seed(derive_seed(o.seed, static_cast<std::uint64_t>(id)), 0x9ace));
  const auto count = static_cast<std::size_t>(gen.between(o.min_place, o.max_place));
  std::vector<augmented_table> drawn;
  for (const auto i : detail::sample_distinct(gen, augmented.size(), count))
    drawn.push_back(augmented[i]);
  std::stable_sort(
      drawn.begin(), drawn.end(),
      [](const augmented_table& a, const augmented_table& b) { return a.dim > b.dim; });
  placement_sample s;
  s.id = id;
  s.greedy_probability = gen.uniform();
  s.dim_sum.assign(devices, 0);
  std::vector<std::uint64_t> memory(devices, 0);
  std::vector<std::size_t> legal;
  for (const auto& a : drawn) {
    const auto bytes = block_bytes(static_cast<std::uint64_t>(pool[a.table].rows),
                                   static_cast<std::uint64_t>(a.dim), pool[a.table].weight_dtype);
    legal.clear();  // line 10: devices without a memory error
    for (std::size_t d = 0; d < devices; ++d)
      if (memory[d] + bytes <= o.device_memory_bytes) legal.push_back(d);
    const double coin = gen.uniform();  // drawn for every table, placed or not
    if (legal.empty()) continue;
    std::size_t pick = legal.front();
    if (coin <= s.greedy_probability) {  // lines 11-12
      for (const auto d : legal)
        if (s.dim_sum[d] < s.dim_sum[pick]) pick = d;
    } else {  // line 14
      pick = legal[static_cast<std::size_t>(gen.below(legal.size()))];
    }
    memory[pick] += bytes;
    s.dim_sum[pick] += a.dim;
    s.tables.push_back(a);
    s.device_of.push_back(static_cast<std::int32_t>(pick));
  }
  if (s.tables.empty()) {
    embplan::detail::fail("collect.device_memory_bytes", o.device_memory_bytes,
                          "room for at least one of the " + std::to_string(drawn.size()) +
                              " tables drawn for placement " + std::to_string(id));
  }
  s.start_ms.resize(devices);
  for (auto& t : s.start_ms)
    t = gen.uniform(0.0, o.max_start_ms);
  return s;
}

// ---------------------------------------------------------------- records
inline nlohmann::json tables_json(std::span<const augmented_table> tables) {
  auto ids = nlohmann::json::array();
  auto dims = nlohmann::json::array();
  for (const auto& a : tables) {
    ids.push_back(a.table);
    dims.push_back(a.dim);
  }
  return nlohmann::json{{"tables", ids}, {"dims", dims}};
}

inline nlohmann::json compute_record(const compute_sample& s, const shard_measurement& m,
                                     std::string_view meter, std::int64_t batch_size) {
  auto j = tables_json(s.tables);
  j["id"] = s.id;
  j["meter"] = meter;
  j["batch_size"] = batch_size;
  j["forward_ms"] = m.forward.mean_ms;
  j["backward_ms"] = m.backward.mean_ms;
  j["total_ms"] = m.total.mean_ms;
  j["cv"] = m.total.cv();
  return j;
}

inline nlohmann::json comm_record(const placement_sample& s, std::span<const comm_cost> costs,
                                  std::string_view meter, std::int64_t batch_size) {
  auto j = tables_json(s.tables);
  j["id"] = s.id;
  j["meter"] = meter;
  j["batch_size"] = batch_size;
  j["device_of"] = s.device_of;
  j["dim_sum"] = s.dim_sum;
  j["start_ms"] = s.start_ms;
  j["greedy_probability"] = s.greedy_probability;
  auto fwd = nlohmann::json::array();
  auto bwd = nlohmann::json::array();
  for (const auto& c : costs) {
    fwd.push_back(c.fwd_ms);
    bwd.push_back(c.bwd_ms);
  }
  j["forward_ms"] = fwd;
  j["backward_ms"] = bwd;
  return j;
}

// Communication costs of a placement from the analytic model (the meter when
// no MPI ranks are there to measure an all-to-all).
inline std::vector<comm_cost> analytic_comm(const placement_sample& s, std::int64_t batch_size,
                                            const analytic_cost& model = {}) {
  task t;
  t.cluster = uniform_topology(s.dim_sum.size());
  t.batch_size = batch_size;
  std::vector<comm_cost> out(s.dim_sum.size());
  model.communication(t, s.dim_sum, s.start_ms, out);
  return out;
}

// What every record of one file shares, so that a run appending to it
// measures what the records on file measured: the kind (a comm record has
// "device_of", a compute record does not), the meter and the batch size, and
// for compute records the drift reference's time ("reference_ms": absent
// without a reference). A records file holds records of one setting; an
// append with another is refused, naming the field and both values.
struct record_settings {
  std::string kind;  // "compute" | "comm"
  std::string meter;
  std::int64_t batch_size = 0;
  // Empty: no drift reference. 0: a reference whose time this run measures
  // itself (it cannot equal a time on file: the run must be given it).
  std::optional<double> reference_ms{};
  // The options of the run (flag -> value as text) that change what it
  // measures or which samples an id names, beyond what a record describes
  // itself: the pool's content, the seed, the dims, the meter's protocol, ...
  // Written under "inputs" in every record; empty: not checked.
  std::map<std::string, std::string> inputs{};
};

namespace detail {

inline std::string record_value_text(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return "(none)";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// Refuses a record (line `line` of `file`) made with other settings than `s`.
inline void require_record_settings(const nlohmann::json& j, const record_settings& s,
                                    const std::string& file, std::size_t line) {
  const std::string on_file = ", what the records of " + file + " (line " + std::to_string(line) +
                              ") were made with (one records file, one setting: choose another "
                              "--out for another)";
  const std::string kind = j.contains("device_of") ? "comm" : "compute";
  if (kind != s.kind) embplan::detail::fail("collect.kind", s.kind, "\"" + kind + "\"" + on_file);
  const std::string meter = record_value_text(j, "meter");
  if (meter != s.meter) {
    embplan::detail::fail("collect.meter", s.meter, "\"" + meter + "\"" + on_file);
  }
  const std::string batch = record_value_text(j, "batch_size");
  if (batch != std::to_string(s.batch_size)) {
    embplan::detail::fail("--batch-size", s.batch_size, batch + on_file);
  }
  if (!s.inputs.empty()) {
    const nlohmann::json* in = j.contains("inputs") ? &j["inputs"] : nullptr;
    if (in == nullptr || !in->is_object()) {
      embplan::detail::fail(
          file + ":" + std::to_string(line), "a record without \"inputs\"",
          "records that name the options they were made with (this file was written before "
          "collect recorded them, so an append cannot be checked against it: choose another "
          "--out)");
    }
    for (const auto& [flag, value] : s.inputs) {
      const std::string had = record_value_text(*in, flag.c_str());
      // As typed: the values are the options' own text.
      if (had != value) throw error(embplan::detail::field_message(flag, value, had + on_file));
    }
  }
  if (s.kind != "compute") return;
  const bool has = j.contains("reference_ms");
  if (!s.reference_ms) {
    if (has) {
      embplan::detail::fail("--reference-ms", "(no drift reference)",
                            "--reference-ms " + record_value_text(j, "reference_ms") + on_file);
    }
    return;
  }
  if (!has) {
    if (*s.reference_ms == 0.0) {
      embplan::detail::fail("--reference", true, "no drift reference" + on_file);
    }
    embplan::detail::fail("--reference-ms", *s.reference_ms, "no drift reference" + on_file);
  }
  const auto& r = j["reference_ms"];
  if (!r.is_number() || r.get<double>() != *s.reference_ms) {
    if (*s.reference_ms == 0.0) {
      embplan::detail::fail("--reference-ms", "(measured anew)",
                            "--reference-ms " + r.dump() + on_file +
                                "; pass it to continue on "
                                "the same scale");
    }
    embplan::detail::fail("--reference-ms", *s.reference_ms, r.dump() + on_file);
  }
}

}  // namespace detail

// Ids already in a JSON-lines file (for resuming). A missing file holds none;
// anything but a regular file (a directory, a device, a FIFO) is refused,
// naming it; a line that is not a JSON object with an integer "id" — e.g. the
// torn last line of an interrupted run — is an error naming the file and line,
// except a torn *last* line, which is dropped (and rewritten by the resumed
// run). With `settings`, every record must have been made with them
// (record_settings).
inline std::set<std::int64_t> recorded_ids(const std::filesystem::path& path,
                                           const record_settings* settings = nullptr) {
  std::set<std::int64_t> ids;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ids;
  io::detail::require_regular_file(path, "records file (JSON lines)",
                                   std::numeric_limits<std::uint64_t>::max());
  std::ifstream in(path);
  if (!in) embplan::detail::fail("file", path.string(), "a readable records file (JSON lines)");
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line))
    lines.push_back(line);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    // Strictly (io::parse_json): a key twice in a record is refused, not
    // read as whichever copy the parser kept.
    nlohmann::json j;
    try {
      j = io::parse_json(lines[i], path.string() + ":" + std::to_string(i + 1));
    } catch (const embplan::error& e) {
      if (i + 1 == lines.size()) break;  // torn tail of an interrupted run
      embplan::detail::fail(path.string() + ":" + std::to_string(i + 1), lines[i].substr(0, 60),
                            std::string("a JSON object with an integer \"id\" (") + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("id") || !j["id"].is_number_integer()) {
      if (i + 1 == lines.size()) break;  // torn tail of an interrupted run
      embplan::detail::fail(path.string() + ":" + std::to_string(i + 1), lines[i].substr(0, 60),
                            "a JSON object with an integer \"id\"");
    }
    if (settings != nullptr) detail::require_record_settings(j, *settings, path.string(), i + 1);
    ids.insert(j["id"].get<std::int64_t>());
  }
  return ids;
}

// Drops a torn last line so appended records start on a line of their own.
inline void truncate_torn_tail(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  if (text.empty() || text.back() == '\n') return;
  const auto nl = text.rfind('\n');
  const std::size_t keep = nl == std::string::npos ? 0 : nl + 1;
  std::filesystem::resize_file(path, keep);
}

}  // namespace embplan::inline EMBPLAN_ABI::meter

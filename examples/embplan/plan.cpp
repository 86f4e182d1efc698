// `embplan plan`: one task planned; which table (and which piece of it) went
// to which device, and the per-device costs under the meter.
#if defined(EMBPLAN_WITH_MPI)
#include "embplan/meter/mpi/plan_meter.hpp"  // first: it picks MPI's C API
#endif

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "embplan/check_plan.hpp"
#include "embplan/core/content_hash.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/io/json.hpp"
#include "embplan/io/torchrec.hpp"
#include "embplan/io/trace.hpp"
#include "embplan/plan_report.hpp"
#include "embplan/search/lower_bound.hpp"
#include "embplan/stage/tiers.hpp"
#include "embplan/torchrec/planner.hpp"
#include "models.hpp"
#include "options.hpp"
#include "planners.hpp"
#include "text_table.hpp"
#include "world.hpp"

namespace embplan_cli {

namespace {

constexpr const char* measured_mpi_meter_text =
    "CPU meter (each device's shard run as one fused embedding bag and timed, "
    "AutoShard protocol, one MPI rank per device); communication measured: MPI_Alltoallv between "
    "the ranks with the plan's per-device byte counts and start skews";

struct plan_args {
  std::string task;
  std::size_t index = 0;
  std::string planner = "lookup_greedy";
  std::uint64_t seed = 0;
  std::string out;
  std::string torchrec;
  std::string trace;
  std::string json;
  std::string model;                   // empty: the bundled learned model
  std::string policy;                  // empty: the bundled DreamShard policy
  std::string autoshard_policy;        // empty: the bundled AutoShard policy
  std::string constraints;             // empty: no user constraints
  std::string check;                   // a plan file to re-validate instead of planning
  std::string tiers = "none";          // "auto": choose_tiers before planning
  std::string data_parallel = "none";  // "auto": small tables replicated (stage/data_parallel.hpp)
  std::string row_layout = "by_cost";  // where a split table's pieces go across hosts
  std::string rows_by_cost = "none";   // "auto": tables that fit cut by rows where cheaper
  bool no_report = false;              // text output without the plan report's sections
  std::string yardstick = "auto";      // TorchRec's plan and a lower bound beside this one
  meter_args meter;
};

// The tasks above which --yardstick auto leaves TorchRec's plan out: tables x
// devices (5,384 x 1,024 is 5.5 million; the torchrec preset plans it in
// about 0.5 s and 0.3 GB, bench_torchrec, and its memory grows with the
// product).
constexpr std::size_t yardstick_auto_limit = 10'000'000;

// What plan prints beside the chosen plan: TorchRec's plan of the same task
// on the same meter, and the additive lower bound (search/lower_bound.hpp).
struct yardstick {
  std::string torchrec;  // "planned", "this plan", "no plan: ...", "skipped: ..."
  std::optional<double> torchrec_ms{};
  std::optional<double> bound_ms{};
  std::string bound;  // what the bound is, or why there is none
};

std::string device_name(const embplan::task& t, std::size_t d) {
  const auto& name = t.cluster.devices[d].name;
  return name.empty() ? std::to_string(d) : name;
}

// "whole", "columns [0, 16)", "rows [0, 500000)", "replica rows [0, 10)",
// "data-parallel copy".
std::string piece_text(const embplan::task& t, const embplan::shard& s) {
  if (s.data_parallel) return "data-parallel copy";
  const auto& spec = t.tables[s.table];
  const bool all_rows = s.row_begin == 0 && s.row_end == spec.rows;
  const bool all_cols = s.col_begin == 0 && s.col_end == spec.dim;
  const auto range = [](auto a, auto b) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + ")";
  };
  std::string out;
  if (s.replica) out = "replica ";
  if (!all_rows || s.replica) out += "rows " + range(s.row_begin, s.row_end);
  if (!all_cols)
    out += (out.empty() || out == "replica " ? "" : ", ") +
           ("columns " + range(s.col_begin, s.col_end));
  return out.empty() ? "whole" : out;
}

// The shards in table order, pieces of one table in plan order.
std::vector<const embplan::shard*> by_table(const embplan::plan& p) {
  std::vector<const embplan::shard*> out;
  for (const auto& s : p.shards)
    out.push_back(&s);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto* a, const auto* b) { return a->table < b->table; });
  return out;
}

// "cuda:0,cuda:3": a table's devices, the first four named and then how many
// more.
std::string devices_text(const embplan::task& t, const std::vector<std::uint32_t>& devices) {
  constexpr std::size_t named = 4;
  std::string out;
  for (std::size_t i = 0; i < devices.size() && i < named; ++i)
    out += (i == 0 ? "" : ",") + device_name(t, devices[i]);
  if (devices.size() > named) out += " +" + std::to_string(devices.size() - named) + " more";
  return out;
}

std::string percent(double part, double whole) {
  return fixed(whole > 0.0 ? 100.0 * part / whole : 0.0, 0) + "%";
}

// "critical path: ...": the device the forward all-to-all waits for (the
// bottleneck), the one that finishes last and what its cost is made of.
std::string critical_path_text(const embplan::task& t, const embplan::plan_report& r) {
  const auto& b = r.devices[r.bottleneck];
  const auto& c = r.devices[r.last_to_finish].cost;
  const double total = c.total_ms();
  const auto part = [&](const char* what, double ms) {
    return std::string(what) + " " + fixed(ms) + " (" + percent(ms, total) + ")";
  };
  const auto parts = part("fwd compute", c.fwd_compute_ms) + " + " +
                     part("bwd compute", c.bwd_compute_ms) + " + " +
                     part("bwd comm", c.bwd_comm_ms) + " + " + part("fwd comm", c.fwd_comm_ms);
  const std::string bound = b.compute_ms() >= total / 2 ? "compute-bound" : "communication-bound";
  const auto name = device_name(t, r.bottleneck);
  if (r.bottleneck == r.last_to_finish) {
    return "critical path: " + name + ", " + fixed(total) + " ms = " + parts +
           "; it starts the forward all-to-all last (the bottleneck): " + bound;
  }
  return "critical path: " + name + " starts the forward all-to-all last (the bottleneck), at " +
         fixed(r.bottleneck_start_ms) + " ms = compute " + fixed(b.compute_ms()) + " + bwd comm " +
         fixed(b.cost.bwd_comm_ms) + "; " + device_name(t, r.last_to_finish) +
         " finishes last, at " + fixed(total) + " ms = " + parts + ", its fwd comm waiting for " +
         name + ": " + bound;
}

// The pieces that drive the bottleneck device, costliest first.
void print_top(const embplan::task& t, const embplan::plan& p, const embplan::plan_report& r,
               bool shares) {
  std::cout << "what drives " << device_name(t, r.bottleneck) << ": its "
            << r.bottleneck_pieces.size() << " costliest of " << r.devices[r.bottleneck].shards
            << " pieces\n";
  text_table top({"table", "name", "piece", "cost ms", "share", "HBM"});
  for (const auto& x : r.bottleneck_pieces) {
    const auto& name = t.tables[x.table].name;
    top.add({std::to_string(x.table), name.empty() ? "-" : name, piece_text(t, p.shards[x.shard]),
             fixed(x.cost_ms, 3), shares ? percent(x.share_of_compute, 1.0) : "-",
             bytes_text(x.hbm_bytes)});
  }
  top.print(std::cout);
  print_wrapped(std::cout,
                shares ? "share = the piece's cost alone over its device's compute (a fused group "
                         "costs less than its pieces alone)."
                       : "share: -, the pieces are priced by the simulated model and the device "
                         "by the measured meter.");
  std::cout << '\n';
}

// The plan report's sections after the per-device table (plan_report.hpp):
// the critical path, imbalance, the pieces that drive the bottleneck device,
// and per table its sharding. `shares`: whether a piece's share of its
// device's compute means something (both priced by one meter).
void print_report(const embplan::task& t, const embplan::plan& p, const embplan::plan_report& r,
                  bool shares) {
  std::cout << '\n';
  print_wrapped(std::cout, critical_path_text(t, r));
  std::cout << '\n';

  text_table imbalance({"imbalance", "max", "mean", "max/mean", "CV"});
  const auto row = [&](const char* what, const embplan::imbalance& x, auto shown) {
    imbalance.add({what, shown(x.max), shown(x.mean), fixed(x.max_over_mean, 3), fixed(x.cv, 3)});
  };
  const auto ms = [](double v) { return fixed(v); };
  row("total ms", r.total, ms);
  row("compute ms", r.compute, ms);
  row("HBM used", r.hbm, [](double v) { return bytes_text(static_cast<std::uint64_t>(v)); });
  imbalance.print(std::cout);
  print_wrapped(std::cout,
                "max/mean: 1 when balanced, up to the number of devices when one carries "
                "everything. CV (coefficient of variation) = standard deviation / mean over the "
                "devices: 0 when balanced. The totals come out close to each other because the "
                "forward all-to-all waits for the last device (fwd comm includes that wait); "
                "compute shows the imbalance behind them.");
  std::cout << '\n';

  if (r.devices[r.bottleneck].shards == 0) {
    std::cout << "what drives " << device_name(t, r.bottleneck)
              << ": no pieces; its cost is communication alone\n\n";
  } else {
    print_top(t, p, r, shares);
  }
  // Per table: a table in one piece is the per-piece listing's row already.
  text_table tables({"table", "name", "sharding", "devices", "pieces", "cost ms", "HBM", "DRAM"});
  std::size_t split = 0;
  for (std::size_t i = 0; i < r.tables.size(); ++i) {
    const auto& x = r.tables[i];
    if (x.pieces + x.replicas <= 1) continue;
    ++split;
    const auto& name = t.tables[i].name;
    tables.add({std::to_string(i), name.empty() ? "-" : name, std::string(x.sharding),
                devices_text(t, x.devices),
                std::to_string(x.pieces) + (x.replicas ? " +" + std::to_string(x.replicas) : ""),
                fixed(x.cost_ms, 3), bytes_text(x.hbm_bytes), bytes_text(x.dram_bytes)});
  }
  if (split == 0) {
    std::cout << "tables split into pieces: none (every table table_wise, listed above)\n";
    return;
  }
  std::cout << "tables split into pieces: " << split << " of " << r.tables.size() << '\n';
  tables.print(std::cout);
  print_wrapped(
      std::cout,
      "pieces: +N replicas. cost ms = the sum of its pieces' costs alone. "
      "DRAM: host memory, the weights and optimizer state of uvm_caching and host tables.");
}

// The report's JSON (--json, key "report"): what print_report shows, its
// per-table list written one table at a time.
void write_report_json(embplan::io::detail::json_writer& w, const embplan::task& t,
                       const embplan::plan_report& r) {
  const auto imbalance = [](const embplan::imbalance& x) {
    return nlohmann::json{
        {"max", x.max}, {"mean", x.mean}, {"max_over_mean", x.max_over_mean}, {"cv", x.cv}};
  };
  const auto& b = r.devices[r.bottleneck];
  const auto& last = r.devices[r.last_to_finish].cost;
  nlohmann::json out;
  out["critical_path"] = {{"bottleneck", r.bottleneck},
                          {"bottleneck_name", device_name(t, r.bottleneck)},
                          {"bottleneck_start_ms", r.bottleneck_start_ms},
                          {"bottleneck_compute_ms", b.compute_ms()},
                          {"bottleneck_bwd_comm_ms", b.cost.bwd_comm_ms},
                          {"last_to_finish", r.last_to_finish},
                          {"last_to_finish_name", device_name(t, r.last_to_finish)},
                          {"cost_ms", r.cost_ms},
                          {"fwd_compute_ms", last.fwd_compute_ms},
                          {"bwd_compute_ms", last.bwd_compute_ms},
                          {"fwd_comm_ms", last.fwd_comm_ms},
                          {"bwd_comm_ms", last.bwd_comm_ms}};
  out["imbalance"] = {{"total_ms", imbalance(r.total)},
                      {"compute_ms", imbalance(r.compute)},
                      {"hbm_used_bytes", imbalance(r.hbm)}};
  out["bottleneck_pieces"] = nlohmann::json::array();
  for (const auto& x : r.bottleneck_pieces) {
    out["bottleneck_pieces"].push_back({{"shard", x.shard},
                                        {"table", x.table},
                                        {"name", t.tables[x.table].name},
                                        {"device", x.device},
                                        {"cost_ms", x.cost_ms},
                                        {"share_of_compute", x.share_of_compute},
                                        {"hbm_bytes", x.hbm_bytes}});
  }
  const auto table_json = [&](std::size_t i) {
    const auto& x = r.tables[i];
    return nlohmann::json{
        {"table", i},           {"name", t.tables[i].name}, {"sharding", x.sharding},
        {"devices", x.devices}, {"pieces", x.pieces},       {"replicas", x.replicas},
        {"cost_ms", x.cost_ms}, {"hbm_bytes", x.hbm_bytes}, {"dram_bytes", x.dram_bytes}};
  };
  w.begin_object();
  w.members(out, {{"tables", [&](auto& tables) {
                     tables.begin_array();
                     for (std::size_t i = 0; i < r.tables.size(); ++i)
                       tables.value(table_json(i));
                     tables.end_array();
                   }}});
  w.end_object();
}

// The CLI's bound on a task's devices (the library reader allows 2^20): a
// small file must not ask for gigabytes of per-device state.
constexpr std::size_t max_task_devices = 65536;

void check_device_count(const nlohmann::json& task, const std::string& where) {
  if (!task.is_object()) return;  // the library's reader names what is wrong
  const auto cluster = task.find("cluster");
  if (cluster == task.end() || !cluster->is_object()) return;
  const auto too_many = [&](const std::string& field, const nlohmann::json& value, bool count) {
    embplan::detail::fail(where + ".cluster." + field,
                          count ? value.dump() : std::to_string(value.size()) + " devices",
                          "at most " + std::to_string(max_task_devices) + " devices per task");
  };
  if (const auto c = cluster->find("count");
      c != cluster->end() && c->is_number() && c->get<double>() > double(max_task_devices)) {
    too_many("count", *c, true);
  }
  if (const auto d = cluster->find("devices");
      d != cluster->end() && d->is_array() && d->size() > max_task_devices) {
    too_many("devices", *d, false);
  }
}

// The task --index picks: the file is read once, and only that task's tables
// are converted, each as the parser reaches it (io::read_task_file), so a file
// of many large tasks costs the memory of one task's tables.
embplan::task load_task(const std::string& file, std::size_t index) {
  auto f = embplan::io::read_task_file(file, index);
  if (f.size() > 0 && index >= f.size()) {
    embplan::detail::fail("--index", index,
                          "an index below the " + std::to_string(f.size()) + " tasks in " + file);
  }
  if (const auto* j = f.task_json(index)) {
    check_device_count(*j, f.lone() ? "task" : "tasks[" + std::to_string(index) + "]");
  }
  return f.take(index);
}

// The user's constraints (--constraints), read for `t`, whose tables take
// the file's dtypes and tiers (apply_table_rules: planned, checked and hashed
// with them); none: empty rules. With --tiers auto, choose_tiers then moves
// tables the file does not tier off HBM while the tables do not fit it; with
// --tiers torchrec, the tables the file does not tier go to the tiers of the
// kernels TorchRec's default sharder picks (torchrec::choose_kernel_tiers);
// the moves are returned for the output (plan and --check take the same
// flags, so they hash the same task).
struct loaded_rules {
  embplan::table_rules rules;
  std::vector<embplan::stage::tier_move> tier_moves;
  std::vector<embplan::torchrec::kernel_move> kernel_moves;  // --tiers torchrec
};

// --tiers: none, auto or torchrec.
void check_tiers(const std::string& value) {
  if (value != "none" && value != "auto" && value != "torchrec") {
    embplan::detail::fail("--tiers", value, "none, auto or torchrec");
  }
}

std::string kernel_moves_text(const embplan::task& t,
                              const std::vector<embplan::torchrec::kernel_move>& moves) {
  if (moves.empty()) {
    return "tiers: torchrec, TorchRec's default sharder keeps every table where the task does "
           "(or finds no plan); none moved\n";
  }
  std::string out = "tiers: torchrec moved " + std::to_string(moves.size()) + " of " +
                    std::to_string(t.tables.size()) +
                    " tables to the tier of the compute kernel TorchRec's default sharder chose:";
  for (const auto& m : moves) {
    const auto& name = t.tables[m.table].name;
    out += "\n  " + (name.empty() ? "#" + std::to_string(m.table) : name) + " -> " +
           std::string(embplan::to_string(m.placement.tier)) + " (" +
           std::string(embplan::torchrec::to_string(m.kernel));
    if (m.placement.tier == embplan::memory_tier::uvm_caching) {
      out += ", load factor " + fixed(m.placement.load_factor, 4);
    }
    out += ")";
  }
  return out + "\n";
}

loaded_rules load_rules(const plan_args& a, embplan::task& t) {
  loaded_rules out;
  std::vector<bool> tiered(t.tables.size(), false);
  if (!a.constraints.empty()) {
    const auto c =
        embplan::io::user_constraints_from_json(embplan::io::read_json_file(a.constraints), t);
    embplan::apply_table_rules(t, c);
    out.rules = embplan::table_rules(t, c);
    for (const auto& rule : c.tables)
      if (rule.placement && rule.table < tiered.size()) tiered[rule.table] = true;
  }
  if (a.tiers == "auto") out.tier_moves = embplan::stage::choose_tiers(t, {}, tiered);
  if (a.tiers == "torchrec") {
    out.kernel_moves = embplan::torchrec::choose_kernel_tiers(t, {}, tiered);
  }
  return out;
}

std::string tier_moves_text(const embplan::task& t,
                            const std::vector<embplan::stage::tier_move>& moves) {
  if (moves.empty()) return "tiers: auto, every table fits in HBM; none moved\n";
  std::string out = "tiers: auto moved " + std::to_string(moves.size()) + " of " +
                    std::to_string(t.tables.size()) + " tables off HBM:";
  for (const auto& m : moves) {
    const auto& name = t.tables[m.table].name;
    out += "\n  " + (name.empty() ? "#" + std::to_string(m.table) : name) + " -> " +
           std::string(embplan::to_string(m.placement.tier));
    if (m.placement.tier == embplan::memory_tier::uvm_caching) {
      out += " (load factor " + fixed(m.placement.load_factor, 4) + ")";
    }
    out += ", frees " + bytes_text(m.hbm_freed_bytes) + ", +" + fixed(m.added_cost_ms, 4) + " ms";
  }
  return out + '\n';
}

// The plan's shards, in plan order, through the user's rules once more before
// anything is printed: a plan that breaks one is an error, not output.
void recheck(const embplan::task& t, const embplan::plan& p, const embplan::table_rules& rules,
             const std::string& file) {
  embplan::replay_constraint(t, p, rules, [&](std::size_t i) -> bool {
    const auto& s = p.shards[i];
    embplan::detail::fail("plan.shards[" + std::to_string(i) + "]",
                          "table '" + t.tables[s.table].name + "' " + piece_text(t, s) +
                              " on device " + std::to_string(s.device),
                          "a placement the constraints of " + file + " admit");
  });
}

// `embplan plan --check plan.json`: the plan re-validated against the task
// (and --constraints), its content hash recomputed from the task, the planner
// and seed it records and its shards. Every problem printed;
// exit_plan_rejected where there is one. A hash that differs is not a problem
// (the plan may be valid for this task) but is said: "valid, but not the plan
// planner X made" (edited by hand, or made for another task).
int run_check(const plan_args& a, const CLI::App& sub) {
  check_tiers(a.tiers);
  for (const char* flag :
       {"--planner", "--seed", "--out", "--torchrec", "--trace", "--json", "--no-report",
        "--data-parallel", "--row-layout", "--rows-by-cost", "--yardstick"}) {
    if (sub.count(flag) > 0) {
      embplan::detail::fail(flag, "given",
                            "no " + std::string(flag) +
                                " with --check (the plan records its planner "
                                "and seed; --check writes nothing)");
    }
  }
  auto t = load_task(a.task, a.index);
  const auto [rules, tier_moves, kernel_moves] = load_rules(a, t);
  if (a.tiers == "auto") std::cout << tier_moves_text(t, tier_moves);
  if (a.tiers == "torchrec") std::cout << kernel_moves_text(t, kernel_moves);
  const auto doc = embplan::io::read_json_file(a.check);
  // A --json report holds the plan under "plan".
  const bool report = doc.is_object() && doc.contains("plan") && doc.contains("devices");
  const auto& pj = report ? doc.at("plan") : doc;
  embplan::plan p;
  std::optional<embplan::plan_provenance> made;
  try {
    p = embplan::io::plan_from_json_unchecked(pj, t);
    made = embplan::io::provenance_from_json(pj);
  } catch (const embplan::error& e) {
    throw embplan::error(a.check + (report ? " (its \"plan\")" : "") + ": " + e.what());
  }
  // What every preset plans under (memory and columns a multiple of 4) and
  // the user's rules.
  auto problems =
      embplan::check_plan(t, p, rules, embplan::plan_check{.dim_multiple = 4, .memory = true});

  std::cout << "plan " << a.check << ": " << p.shards.size() << " shards, checked against task '"
            << t.name << "' (" << t.tables.size() << " tables on " << t.cluster.size()
            << " devices) of " << a.task << '\n';
  bool hash_differs = false;
  std::uint64_t again = 0;
  if (made) {
    again = embplan::content_hash(t, p, made->planner, made->seed);
    hash_differs = again != made->content_hash;
    std::cout << "content hash: recorded " << embplan::hash_hex(made->content_hash)
              << ", recomputed " << embplan::hash_hex(again) << " from the task, planner "
              << made->planner << ", seed " << made->seed << " and the plan's shards: "
              << (hash_differs ? "DIFFERENT (the plan was edited, or made for another task, "
                                 "planner or seed)"
                               : "match")
              << '\n';
    std::cout << "embplan version: planned by " << made->version << ", checked by "
              << EMBPLAN_VERSION_STRING
              << (made->version == EMBPLAN_VERSION_STRING
                      ? ""
                      : " (differ: the same inputs may plan otherwise)")
              << '\n';
  } else {
    std::cout << "content hash: none recorded (a plan written by hand or by an older embplan): "
                 "cannot tell whether this task was the one planned\n";
  }
  std::cout << "checked: every table covered exactly once (rows x columns, replicas aside), "
               "device and table indices, piece shapes, columns a multiple of 4, memory per "
               "device"
            << (rules.empty() ? std::string() : ", " + rules.describe() + " from " + a.constraints)
            << '\n';
  // Said whatever the problems: the plan is not the one its planner made.
  const auto not_made_by = [&] {
    return "not the plan planner " + made->planner + " made (content hash recorded " +
           embplan::hash_hex(made->content_hash) + ", this plan's " + embplan::hash_hex(again) +
           ")";
  };
  if (problems.empty()) {
    std::cout << (hash_differs ? "plan valid, but " + not_made_by() : std::string("plan OK"))
              << '\n';
    return 0;
  }
  const auto count = problems.size();
  std::cout << count << (count == 1 ? " problem:\n" : " problems:\n");
  for (const auto& x : problems)
    std::cout << "  " << embplan::to_string(x) << '\n';
  if (hash_differs) std::cout << "and " << not_made_by() << '\n';
  return exit_plan_rejected;
}

int run_plan(const plan_args& a, const CLI::App& sub) {
  // Every option checked before the first line of output.
  const std::string planner = parse_planner(a.planner, "--planner");
  check_meter(a.meter);
  check_output_paths(
      {{"--out", &a.out}, {"--torchrec", &a.torchrec}, {"--trace", &a.trace}, {"--json", &a.json}});
  if (a.yardstick != "auto" && a.yardstick != "on" && a.yardstick != "off") {
    embplan::detail::fail("--yardstick", a.yardstick, "auto, on or off");
  }
  check_tiers(a.tiers);
  check_none_or_auto("--data-parallel", a.data_parallel);
  check_none_or_auto("--rows-by-cost", a.rows_by_cost);
  // An option the chosen planner would not read is refused, not ignored.
  if (!a.policy.empty() && !is_dreamshard(planner)) {
    embplan::detail::fail("--policy", a.policy,
                          "only with --planner dreamshard or rowwise_dreamshard (planner '" +
                              planner + "' reads no DreamShard policy)");
  }
  if (!a.autoshard_policy.empty() && !is_autoshard(planner)) {
    embplan::detail::fail("--autoshard-policy", a.autoshard_policy,
                          "only with --planner autoshard or rowwise_autoshard (planner '" +
                              planner + "' reads no AutoShard policy)");
  }
  if (sub.count("--row-layout") > 0 && !is_rowwise(planner) && a.rows_by_cost != "auto") {
    embplan::detail::fail("--row-layout", a.row_layout,
                          "only with a rowwise_ planner or --rows-by-cost auto (planner '" +
                              planner + "' cuts no table by rows)");
  }
  const embplan::stage::stage_settings stages{
      .layout = embplan::stage::row_layout_from(a.row_layout, "--row-layout"),
      .data_parallel = {.enabled = a.data_parallel == "auto"},
      .rows_by_cost = a.rows_by_cost == "auto"};
  // What the plan records and hashes as its planner: a data-parallel stage
  // plans otherwise, so it is part of the name; the same for a layout other
  // than the default and for row cuts by cost.
  const std::string made_by =
      planner + (stages.data_parallel.enabled ? "+data_parallel" : "") +
      (stages.layout == embplan::stage::row_layout::by_cost
           ? ""
           : "+row_layout=" + std::string(embplan::stage::to_string(stages.layout))) +
      (stages.rows_by_cost ? "+rows_by_cost" : "");
  auto t = load_task(a.task, a.index);
  check_dim_multiple(t.tables, "task.tables");
  const auto [rules, tier_moves, kernel_moves] = load_rules(a, t);
  auto pm = load_planning_model(a.model);
  if (is_dreamshard(planner)) load_policy(pm, a.policy);
  if (is_autoshard(planner)) load_autoshard_policy(pm, a.autoshard_policy);
  const bool measured = a.meter.name == "measured";
#if defined(EMBPLAN_WITH_MPI)
  const world w;
  const bool mpi = measured && w.size() > 1;
  if (mpi && (a.meter.reference || a.meter.reference_ms > 0.0)) {
    embplan::detail::fail("--reference", true,
                          "off under mpirun (the MPI plan meter has no drift reference)");
  }
#endif
  const auto chosen = meter_of(a.meter, pm);
  const auto& meter = chosen.meter;
  const auto& meter_text = chosen.text;
  // A measured meter would time every piece once more: pieces are priced by
  // the planning model's simulation instead.
  const auto piece_meter = measured ? meter_of({}, pm) : meter_choice{meter, meter_text};

  const auto result = run_planner(planner, t, a.seed, pm, rules, stages);
  if (!result.ok) {
    // Not the user's error (exit 1, commands.hpp): the task is valid input,
    // and another planner (a rowwise_ one, where a table fits no device) may
    // plan it.
    throw no_plan_found("planner '" + planner +
                        "' found no plan: " + failure_text(planner, result.failure, t));
  }
  if (!rules.empty()) recheck(t, result.placement, rules, a.constraints);
  const auto made = embplan::provenance_of(t, result.placement, made_by, a.seed);

  // Under mpirun with one rank per device, --meter measured times the
  // all-to-all for real (meter/mpi/plan_meter.hpp); rank 0 reports.
  std::string used_meter_text = meter_text;
  embplan::plan_cost cost;
#if defined(EMBPLAN_WITH_MPI)
  if (mpi) {
    embplan::meter::mpi::plan_meter_options o;
    o.compute.options.batch_size = measured_batch(a.meter, pm);
    o.compute.options.flush_bytes = flush_bytes_of(a.meter.flush_mib);
    cost = embplan::meter::mpi::measure_plan(MPI_COMM_WORLD, t, result.placement, o);
    used_meter_text = std::string(measured_mpi_meter_text) + "; " +
                      std::to_string(o.compute.options.batch_size) +
                      " bags per table per compute run";
    if (w.rank() != 0) return 0;
  } else {
    cost = embplan::evaluate(t, result.placement, meter);
  }
#else
  cost = embplan::evaluate(t, result.placement, meter);
#endif
  // Per-device memory and the pieces' costs alone: the plan report's
  // (plan_report.hpp), each piece priced by piece_meter.
  const auto rep = embplan::plan_report_of(t, result.placement, cost, piece_meter.meter);

  std::cout << "task '" << t.name << "': " << t.tables.size() << " tables on " << t.cluster.size()
            << " devices, planner " << made_by << " (search " << fixed(result.search_ms, 3)
            << " ms), seed " << a.seed << "\ncontent hash: " << embplan::hash_hex(made.content_hash)
            << " of (task, planner, seed, shards), embplan " << made.version
            << "\nmeter: " << a.meter.name << ", " << used_meter_text
            << "\nplanning model: " << pm.text << '\n';
  if (is_dreamshard(planner)) std::cout << "policy: " << pm.policy_text << '\n';
  if (is_autoshard(planner)) std::cout << "policy: " << pm.autoshard_text << '\n';
  if (!result.made_by.empty()) std::cout << "plan by portfolio member " << result.made_by << '\n';
  if (!rules.empty()) {
    std::cout << "constraints: " << rules.describe() << " from " << a.constraints
              << ", applied and the plan re-checked against them\n";
  }
  if (a.tiers == "auto") std::cout << tier_moves_text(t, tier_moves);
  if (a.tiers == "torchrec") std::cout << kernel_moves_text(t, kernel_moves);
  std::cout << '\n';

  // Per table: where each piece went, its cost alone and its bytes.
  nlohmann::json report;
  report["task"] = t.name;
  report["planner"] = made_by;
  report["seed"] = a.seed;
  report["content_hash"] = embplan::hash_hex(made.content_hash);
  report["embplan_version"] = made.version;
  report["search_ms"] = result.search_ms;
  if (!result.made_by.empty()) report["made_by"] = result.made_by;
  report["meter"] = a.meter.name + ", " + used_meter_text;
  report["planning_model"] = pm.text;
  if (is_dreamshard(planner)) report["policy"] = pm.policy_text;
  if (is_autoshard(planner)) report["policy"] = pm.autoshard_text;
  if (!rules.empty()) {
    report["constraints"] = {{"file", a.constraints}, {"applied", rules.describe()}};
  }
  if (a.tiers == "auto") {
    nlohmann::json moves = nlohmann::json::array();
    for (const auto& m : tier_moves) {
      moves.push_back({{"table", m.table},
                       {"tier", std::string(embplan::to_string(m.placement.tier))},
                       {"load_factor", m.placement.load_factor},
                       {"hbm_freed_bytes", m.hbm_freed_bytes},
                       {"added_cost_ms", m.added_cost_ms}});
    }
    report["tier_moves"] = std::move(moves);
  }
  if (a.tiers == "torchrec") {
    nlohmann::json moves = nlohmann::json::array();
    for (const auto& m : kernel_moves) {
      moves.push_back({{"table", m.table},
                       {"kernel", std::string(embplan::torchrec::to_string(m.kernel))},
                       {"tier", std::string(embplan::to_string(m.placement.tier))},
                       {"load_factor", m.placement.load_factor}});
    }
    report["tier_moves"] = std::move(moves);
  }
  report["piece_cost_by"] = piece_meter.text;
  // --json's "tables": each piece as the table below shows it, made as it is
  // written (a million pieces are never a document in memory).
  const auto pieces = by_table(result.placement);
  const auto piece_json = [&](const embplan::shard* s) {
    const auto& priced = rep.pieces[static_cast<std::size_t>(s - result.placement.shards.data())];
    return nlohmann::json{{"table", s->table},
                          {"name", t.tables[s->table].name},
                          {"sharding", rep.tables[s->table].sharding},
                          {"piece", piece_text(t, *s)},
                          {"device", s->device},
                          {"device_name", device_name(t, s->device)},
                          {"cost_ms", priced.cost_ms},
                          {"memory_bytes", priced.hbm_bytes}};
  };
  text_table tables({"table", "name", "sharding", "piece", "device", "cost ms", "memory"});
  bool split_cols = false;
  bool split_rows = false;
  bool replicas = false;
  bool copies = false;
  for (const auto* s : pieces) {
    const auto& spec = t.tables[s->table];
    split_cols = split_cols || s->cols() != spec.dim;
    split_rows = split_rows || (!s->replica && s->rows() != spec.rows);
    replicas = replicas || s->replica;
    copies = copies || s->data_parallel;
  }
  tables.print_rows(std::cout, pieces.size(), [&](std::size_t i) {
    const auto* s = pieces[i];
    const auto& spec = t.tables[s->table];
    const auto& priced = rep.pieces[static_cast<std::size_t>(s - result.placement.shards.data())];
    return std::vector<std::string>{std::to_string(s->table),
                                    spec.name.empty() ? "-" : spec.name,
                                    std::string(rep.tables[s->table].sharding),
                                    piece_text(t, *s),
                                    device_name(t, s->device),
                                    fixed(priced.cost_ms, 3),
                                    bytes_text(priced.hbm_bytes)};
  });
  std::string legend = "cost ms = the piece alone on its device, forward + backward compute, ";
  legend +=
      measured ? "priced by the simulated meter (" + piece_meter.text + "), not measured once more."
               : "priced by the meter.";
  if (split_cols) legend += " columns [a, b): a piece of a table split by columns.";
  if (split_rows) legend += " rows [a, b): row-wise shards of a table split by rows.";
  if (replicas) legend += " replica: a copy of a table's hot rows.";
  if (copies) {
    legend +=
        " data-parallel copy: the whole table on every device, each looking up its device's "
        "share of the batch; their gradients' all-reduce is in bwd comm.";
  }
  print_wrapped(std::cout, legend);
  std::cout << '\n';

  // Per device: what the meter says of the whole plan.
  // "DRAM free" only where some device's host DRAM is limited (dram_bytes).
  const bool dram_limited = std::any_of(rep.devices.begin(), rep.devices.end(),
                                        [](const auto& dr) { return dr.dram_limited(); });
  // "sent dim" only where a table_row_wise range sends fewer columns than
  // its device holds.
  const bool reduced = std::any_of(rep.devices.begin(), rep.devices.end(),
                                   [](const auto& dr) { return dr.sent_dim != dr.dim_sum; });
  std::vector<std::string> header{"device", "shards", "dim"};
  if (reduced) header.push_back("sent dim");
  header.insert(header.end(), {"HBM used", "HBM free", "DRAM"});
  if (dram_limited) header.push_back("DRAM free");
  header.insert(header.end(), {"fwd comp", "bwd comp", "fwd comm", "bwd comm", "total ms"});
  text_table devices(std::move(header));
  report["devices"] = nlohmann::json::array();
  for (std::size_t d = 0; d < t.cluster.size(); ++d) {
    const auto& dr = rep.devices[d];
    const auto& c = dr.cost;
    std::vector<std::string> row{device_name(t, d), std::to_string(dr.shards),
                                 std::to_string(dr.dim_sum)};
    if (reduced) row.push_back(std::to_string(dr.sent_dim));
    row.insert(row.end(), {bytes_text(dr.hbm_used_bytes), bytes_text(dr.hbm_free_bytes),
                           bytes_text(dr.dram_used_bytes)});
    if (dram_limited)
      row.push_back(dr.dram_limited() ? bytes_text(dr.dram_free_bytes) : "unlimited");
    row.insert(row.end(), {fixed(c.fwd_compute_ms), fixed(c.bwd_compute_ms), fixed(c.fwd_comm_ms),
                           fixed(c.bwd_comm_ms), fixed(c.total_ms())});
    devices.add(std::move(row));
    report["devices"].push_back({{"device", d},
                                 {"device_name", device_name(t, d)},
                                 {"shards", dr.shards},
                                 {"dim", dr.dim_sum},
                                 {"sent_dim", dr.sent_dim},
                                 {"memory_bytes", dr.hbm_used_bytes},
                                 {"hbm_used_bytes", dr.hbm_used_bytes},
                                 {"hbm_free_bytes", dr.hbm_free_bytes},
                                 {"hbm_capacity_bytes", dr.hbm_capacity_bytes},
                                 {"dram_used_bytes", dr.dram_used_bytes},
                                 {"fwd_compute_ms", c.fwd_compute_ms},
                                 {"bwd_compute_ms", c.bwd_compute_ms},
                                 {"fwd_comm_ms", c.fwd_comm_ms},
                                 {"bwd_comm_ms", c.bwd_comm_ms},
                                 {"total_ms", c.total_ms()}});
    if (dr.dram_limited()) {  // absent: not limited
      report["devices"].back()["dram_capacity_bytes"] = dr.dram_capacity_bytes;
      report["devices"].back()["dram_free_bytes"] = dr.dram_free_bytes;
    }
  }
  devices.print(std::cout);
  if (reduced) {
    print_wrapped(std::cout,
                  "sent dim: the columns a device sends in the forward all-to-all; a table cut by "
                  "rows inside one host (table_row_wise, grid) is reduced there first, each of "
                  "its devices sending a share of its columns.");
  }
  std::cout << "cost (max over devices): " << fixed(cost.max_ms()) << " ms, degree of balance "
            << fixed(cost.balance(), 3) << " (min/max compute)\n";
  // The yardstick: TorchRec's plan of the same task on the same meter, and
  // the lower bound.
  yardstick ys;
#if defined(EMBPLAN_WITH_MPI)
  const bool one_process = !mpi;
#else
  const bool one_process = true;
#endif
  if (a.yardstick == "off") {
    ys.torchrec = "skipped: --yardstick off";
  } else if (!one_process) {
    ys.torchrec = "skipped: under mpirun (the plan meter measures one plan per run)";
  } else if (a.yardstick == "auto" && t.tables.size() * t.cluster.size() > yardstick_auto_limit) {
    ys.torchrec = "skipped: " + std::to_string(t.tables.size()) + " tables x " +
                  std::to_string(t.cluster.size()) + " devices is more than --yardstick auto's " +
                  std::to_string(yardstick_auto_limit) + " (--yardstick on plans it anyway)";
  } else if (planner == "torchrec" && made_by == "torchrec") {
    ys.torchrec = "this plan";
    ys.torchrec_ms = cost.max_ms();
  } else {
    const auto tr = run_planner("torchrec", t, a.seed, pm, rules);
    if (tr.ok) {
      ys.torchrec = "planned";
      ys.torchrec_ms = embplan::evaluate(t, tr.placement, meter).max_ms();
    } else {
      ys.torchrec = "no plan: " + tr.failure;
    }
  }
  if (a.yardstick == "off") {
    ys.bound = "skipped: --yardstick off";
  } else if (measured) {
    ys.bound = "none under --meter measured (it would time every table alone)";
  } else {
    ys.bound_ms = embplan::additive_lower_bound(t, meter);
    ys.bound =
        "additive: the larger of the costliest table and the sum of the tables' costs over the "
        "devices, each table priced whole and alone by the meter (a bound for table-wise "
        "plans)";
  }
  {
    std::string line = "yardstick: this plan " + fixed(cost.max_ms()) + " ms";
    if (ys.torchrec == "this plan") {
      line += " (TorchRec's own)";
    } else if (ys.torchrec_ms) {
      line += " · TorchRec's " + fixed(*ys.torchrec_ms) + " ms";
    } else {
      line += " · TorchRec's: " + ys.torchrec;
    }
    if (ys.bound_ms) line += " · no table-wise plan below " + fixed(*ys.bound_ms) + " ms";
    print_wrapped(std::cout, line);
  }
  report["yardstick"] = {
      {"this_plan_ms", cost.max_ms()},
      {"torchrec", ys.torchrec},
      {"torchrec_ms", ys.torchrec_ms ? nlohmann::json(*ys.torchrec_ms) : nlohmann::json(nullptr)},
      {"lower_bound_ms", ys.bound_ms ? nlohmann::json(*ys.bound_ms) : nlohmann::json(nullptr)},
      {"lower_bound", ys.bound}};
  if (!a.no_report) print_report(t, result.placement, rep, !measured);
  report["cost_ms"] = cost.max_ms();
  report["balance"] = cost.balance();
  // "plan": what plan --check reads.
  const auto write_plan = [&](embplan::io::detail::json_writer& out) {
    embplan::io::write_plan_json(out, t, result.placement, &made);
  };
  if (!a.out.empty()) {
    embplan::io::write_json_file_streamed(a.out, write_plan);
    std::cout << "wrote " << a.out << '\n';
  }
  if (!a.torchrec.empty()) {
    embplan::io::write_json_file(a.torchrec, embplan::io::torchrec_sharding(t, result.placement));
    std::cout << "wrote " << a.torchrec << '\n';
  }
  if (!a.trace.empty()) {
    embplan::io::write_json_file(a.trace, embplan::io::chrome_trace(t, cost));
    std::cout << "wrote " << a.trace << " (open in Perfetto or chrome://tracing)\n";
  }
  if (!a.json.empty()) {
    embplan::io::write_json_file_streamed(a.json, [&](embplan::io::detail::json_writer& doc) {
      doc.begin_object();
      doc.members(report, {{"plan", write_plan},
                           {"report", [&](auto& out) { write_report_json(out, t, rep); }},
                           {"tables", [&](auto& out) {
                              out.begin_array();
                              for (const auto* s : pieces)
                                out.value(piece_json(s));
                              out.end_array();
                            }}});
      doc.end_object();
    });
    std::cout << "wrote " << a.json << '\n';
  }
  return 0;
}

}  // namespace

command add_plan(CLI::App& app) {
  auto a = std::make_shared<plan_args>();
  auto* sub = app.add_subcommand(
      "plan", "Plan one task: which table (and piece) went to which device, per-device costs");
  sub->add_option("--task", a->task, "task JSON (one task or {\"tasks\": [...]})")->required();
  sub->add_option("--check", a->check,
                  "re-validate this plan (--out or --json file) against the task and "
                  "--constraints instead of planning: coverage, indices, shapes, memory, "
                  "constraints, content hash");
  add_int_option(sub, "--index", a->index, "which task of the file", 0, max_task_count - 1)
      ->capture_default_str();
  sub->add_option("--planner", a->planner, "planner: one of " + planner_list())
      ->capture_default_str();
  add_seed_option(sub, a->seed);
  sub->add_option("--out", a->out, "write the plan as JSON");
  sub->add_option("--torchrec", a->torchrec,
                  "write a TorchRec-style ParameterSharding description");
  sub->add_option("--trace", a->trace, "write the per-device timeline as Chrome trace-event JSON");
  sub->add_option("--json", a->json,
                  "write the report (per piece, per device, and the plan report under "
                  "\"report\") as JSON");
  sub->add_option("--yardstick", a->yardstick,
                  "auto (default): beside the plan, TorchRec's plan of the same task on the same "
                  "meter (the torchrec preset) where tables x devices <= 10,000,000, and the "
                  "additive lower bound; on: TorchRec's plan whatever the size; off: neither "
                  "plan nor bound")
      ->capture_default_str();
  sub->add_flag("--no-report", a->no_report,
                "print only the per-piece and per-device tables: no critical path, imbalance, "
                "costliest pieces or per-table sharding (--json has them all the same)");
  add_model_option(sub, a->model);
  add_policy_option(sub, a->policy);
  add_autoshard_policy_option(sub, a->autoshard_policy);
  sub->add_option("--constraints", a->constraints,
                  "user constraints JSON: per table allowed devices/hosts, sharding kinds, "
                  "min/max_shards, dtype, tier; co-location and anti-affinity groups "
                  "(docs/constraints.md)");
  sub->add_option("--tiers", a->tiers,
                  "none (default): every table in the tier the task and --constraints give; "
                  "auto: while the tables do not fit 90% of the cluster's HBM, move tables to "
                  "uvm_caching or host, least added analytic cost per HBM byte freed first; "
                  "torchrec: move each table to the tier of the compute kernel TorchRec's "
                  "default sharder picks for it (fused_uvm_caching: uvm_caching, fused_uvm: "
                  "host)");
  sub->add_option("--data-parallel", a->data_parallel,
                  "none (default); auto: first replicate, as data-parallel copies on every "
                  "device, the tables cheaper so than placed whole (their all-to-all against "
                  "their gradient all-reduce; copies within 10% of device memory), then plan "
                  "the rest (docs/sharding.md)");
  sub->add_option("--row-layout", a->row_layout,
                  "where a rowwise_ planner puts a table that fits no device, on a cluster of "
                  "several hosts: by_cost (default; the cheapest), host_first (rows inside one "
                  "host, table_row_wise, else a grid over hosts), row_wise (spread over hosts) "
                  "(docs/sharding.md)");
  sub->add_option("--rows-by-cost", a->rows_by_cost,
                  "none (default); auto: also cut a table that fits by rows where, narrowest "
                  "column block and all, it alone would bound the plan and the estimate with "
                  "the cut is lower; the plan with the cuts is kept only if it costs less than "
                  "the plan without (docs/sharding.md)");
  add_meter_options(sub, a->meter);
  return {sub, [a, sub] { return a->check.empty() ? run_plan(*a, *sub) : run_check(*a, *sub); }};
}

}  // namespace embplan_cli
